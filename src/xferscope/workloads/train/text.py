"""A training-input run (or a ``--find-max`` search, or paths side by side) in words (its lines and tables) and in
``--csv`` (a row per accelerator); a run's live line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from xferscope.report import text_table
from xferscope.units import figure_text, format_bytes
from xferscope.workloads.common.cells import ms, pct, table_csv
from xferscope.workloads.common.job_tables import Column, gpus_cell, job_tables
from xferscope.workloads.common.level import LEVEL_RULE
from xferscope.workloads.train.accelerators import TrainTick
from xferscope.workloads.train.train_cluster import memory_rule_note
from xferscope.workloads.train.train_compare import TrainComparison
from xferscope.workloads.train.train_record import FindMaxResult, TrainResult


def headline(r: TrainResult) -> str:
    s = r.spec
    return (
        f"workload train {s.preset} ({s.accelerator_type}, {s.computation_time:g} s a batch of {s.batch}): "
        f"{s.accelerators} accelerator{'s' * (s.accelerators != 1)} through {s.path}, compute {s.compute}, "
        f"{s.read_threads} read threads each"
    )


def verdict(r: TrainResult) -> str:
    if r.passed is None:
        return "AU not known (fewer than 2 steps)"
    word = "PASS" if r.passed else "FAIL"
    return f"AU {pct(r.au)} against {pct(r.au_threshold)}: {word}"


def table_lines(r: TrainResult, per_accelerator: bool = True) -> list[Any]:
    lines = [headline(r)]
    if r.incomplete:
        lines.append(f"  {r.status.upper()}: {r.error or 'stopped before its end'} (figures of the steps taken)")
    lines.append(
        f"  {verdict(r)} | {figure_text(r.samples_per_s)} samples/s | {figure_text(r.mb_per_s, '{:.0f}')} MB/s | I/O wait p50 "
        f"{ms(r.io_wait_p50_s)} p99 {ms(r.io_wait_p99_s)} | first batch {ms(r.first_batch_s)} | "
        f"{figure_text(r.cpu_s_per_gib, '{:.3f}')} CPU-s/GiB"
    )
    if per_accelerator:
        headers = ("acc", "gpu", "steps", "AU", "samples/s", "MB/s", "wait p50", "wait p99", "first", "CPU-s/GiB")
        rows = [
            (
                a.index,
                "-" if a.gpu is None else a.gpu,
                a.steps,
                pct(a.au),
                figure_text(a.samples_per_s),
                figure_text(a.mb_per_s, "{:.0f}"),
                ms(a.io_wait_p50_s),
                ms(a.io_wait_p99_s),
                ms(a.first_batch_s),
                figure_text(a.cpu_s_per_gib, "{:.3f}"),
            )
            for a in r.accelerators
        ]
        lines.append(text_table(headers, rows))
    if r.cluster is not None:
        lines += cluster_lines(r)
    d = r.data
    where = "generated" if d.get("generated") else "read as they are"
    lines.append(
        f"  data: {d.get('files')} files, {d.get('samples')} samples, {format_bytes(d.get('bytes', 0))} "
        f"({where}) in {d.get('where')}" + (" (kept)" if d.get("kept") else "")
    )
    if r.labels:
        lines.append("  " + "; ".join(r.labels))
    return lines


def cluster_lines(r: TrainResult) -> list[Any]:
    """An MPI job's hosts and ranks, each as it measured itself, the slowest host named, and MLPerf's memory
    rule where it is not met."""
    c = r.cluster
    assert c is not None
    how = f"; the data set {'once per host' if c.data_per_host else 'once for all'}"
    rates: list[Column] = [
        ("samples/s", lambda x: figure_text(x.samples_per_s)),
        ("MB/s", lambda x: figure_text(x.mb_per_s, "{:.0f}")),
    ]
    hosts: list[Column] = [
        ("acc", lambda h: h.accelerators),
        ("AU", lambda h: pct(h.au)),
        ("pass", lambda h: {True: "pass", False: "fail", None: "-"}[h.passed]),
        *rates,
        ("wait p99", lambda h: ms(h.io_wait_p99_s)),
    ]
    ranks: list[Column] = [
        ("accelerators", lambda k: f"{k.first_accelerator}-{k.first_accelerator + k.accelerators - 1}"),
        ("GPUs", gpus_cell),
        ("AU", lambda k: pct(k.au)),
        *rates,
        ("seconds", lambda k: f"{k.seconds:.1f}"),
    ]
    lines = job_tables(c, how, hosts, ranks)
    note = memory_rule_note(r)
    if note:
        lines.append(f"  {note}")
    return lines


def find_max_mpi_lines(f: FindMaxResult, ranks: int) -> list[Any]:
    """``--find-max --mpi``: the most a rank keeps on every host, the job's record at that count below."""
    s = f.spec
    lines: list[Any] = [
        f"This storage keeps {f.best} {s.accelerator_type.upper()}-class accelerator{'s' * (f.best != 1)} a rank "
        f"({f.best * ranks} over {ranks} ranks) training {s.preset} at AU >= {pct(f.au_threshold)} on every host "
        f"through {s.path} (compute {s.compute}; {f.runs} runs, counts up to {f.upper} a rank tried by doubling "
        "then bisecting)"
    ]
    if f.status != "ok":
        lines.append(f"  {f.status.upper()}: the counts measured until then (the answer is at least {f.best})")
    for p in f.points:
        verdict_word = "pass" if p.passed else "fail"
        lines.append(
            f"  {p.accelerators:>4} a rank ({p.accelerators * ranks} in all): AU of the slowest host {pct(p.au)} "
            f"{verdict_word}"
        )
    best = [r for r in f.results if r.spec.accelerators == f.best * ranks]
    if best:
        lines += table_lines(best[-1], per_accelerator=False)
    return lines


def find_max_lines(f: FindMaxResult) -> list[str]:
    s = f.spec
    cls = s.accelerator_type.upper()
    lines = [
        f"This storage keeps {f.best} {cls}-class accelerator{'s' * (f.best != 1)} training {s.preset} at "
        f"AU >= {pct(f.au_threshold)} through {s.path} (compute {s.compute}; {f.runs} runs, "
        f"counts up to {f.upper} tried by doubling then bisecting)"
    ]
    if f.status != "ok":
        lines.append(f"  {f.status.upper()}: the counts measured until then (the answer is at least {f.best})")
    for p in f.points:
        runs = ", ".join(pct(a) for a in p.aus)
        lines.append(f"  {p.accelerators:>4} accelerators: AU {pct(p.au)} ({runs}) {'pass' if p.passed else 'fail'}")
    return lines


def comparison_lines(c: TrainComparison, title: str) -> list[Any]:
    searched = any(e.sustained is not None for e in c.entries)
    lines: list[Any] = [title]
    headers = ["#", "path", "source", "acc", *(["keeps"] if searched else []), "AU", "range", "pass"]
    headers += ["samples/s", "MB/s", "level with"]
    rows = []
    for i, e in enumerate(c.entries, 1):
        rng = "-" if e.low is None else f"{pct(e.low)}-{pct(e.high)}"
        keeps = [("-" if e.sustained is None else e.sustained)] if searched else []
        passed = {True: "pass", False: "fail", None: "-"}[e.passed]
        rows.append(
            (
                i,
                e.label,
                e.source,
                "-" if e.accelerators is None else e.accelerators,
                *keeps,
                pct(e.value),
                rng,
                passed,
                figure_text(e.samples_per_s),
                figure_text(e.mb_per_s, "{:.0f}"),
                ", ".join(e.level_with) or "-",
            )
        )
    lines.append(text_table(headers, rows, left=("path", "source", "level with")))
    rule = "the most accelerators kept at the threshold first (--find-max), then " if searched else ""
    lines.append(f"  ranked: {rule}the highest AU (the median of a path's runs); {LEVEL_RULE}")
    if c.status != "ok":
        lines.append(f"  {c.status.upper()}: the rounds measured until then")
    return lines


def train_lines(r: TrainResult | FindMaxResult | TrainComparison) -> list[Any]:
    """A run's table, a search's counts, or paths side by side (ranked, and with --find-max what the storage
    keeps); saved runs side by side, ranked alone."""
    if isinstance(r, FindMaxResult):
        return find_max_lines(r)
    if not isinstance(r, TrainComparison):
        return table_lines(r)
    if not (r.results or r.searches):  # saved runs: no spec of their own
        return comparison_lines(r, f"{len(r.entries)} saved training runs")
    s = r.spec
    how = f"{r.rounds} rotated rounds over one data set" if not r.searches else "--find-max each"
    title = f"workload train {s.preset} ({s.accelerator_type}): {len(r.entries)} paths x{s.accelerators}, "
    lines = comparison_lines(r, f"{title}compute {s.compute}, {how}")
    if r.searches:
        kept = ", ".join(
            f"{e.sustained} through {e.label}"
            if i
            else f"{e.sustained} {s.accelerator_type.upper()}-class "
            f"accelerator{'s' * (e.sustained != 1)} training {s.preset} at AU >= {pct(r.searches[0].au_threshold)} "
            f"through {e.label}"
            for i, e in enumerate(r.entries)
        )
        lines.append(f"This storage keeps {kept}")
    return lines


#: a training comparison's columns after its rank, each a field of an entry's JSON
COMPARISON_COLUMNS = (
    "label",
    "source",
    "path",
    "accelerators",
    "sustained",
    "runs",
    "au",
    "au_min",
    "au_max",
    "passed",
    "samples_per_s",
    "mb_per_s",
)
#: the figures of an accelerator's row, and of the run's "all" row, each an attribute of both
FIGURE_COLUMNS = (
    "au",
    "passed",
    "samples_per_s",
    "mb_per_s",
    "io_wait_p50_s",
    "io_wait_p99_s",
    "first_batch_s",
    "cpu_s_per_gib",
)


def _host_of(run: TrainResult) -> Callable[[int], str]:
    """Under MPI, the host of the accelerator numbered ``i`` in the job ("" on one host)."""
    c = run.cluster
    if c is None:
        return lambda i: ""
    ranges = [(k.first_accelerator, k.first_accelerator + k.accelerators, k.host) for k in c.per_rank]
    return lambda i: next((host for lo, hi, host in ranges if lo <= i < hi), "")


def csv_text(r: TrainResult | FindMaxResult | TrainComparison) -> str:
    """A comparison: one row per entry, by rank. A run (or each run of a search): one row per accelerator, then
    the run's own row (accelerator "all"); under MPI each row names its host ("all" for the job's), and a row a
    host follows the job's."""
    if isinstance(r, TrainComparison):  # an entry's fields as its file names them (au, au_min, au_max)
        entries = ([i, *map(msgspec.to_builtins(e).get, COMPARISON_COLUMNS)] for i, e in enumerate(r.entries, 1))
        return table_csv(["rank", *COMPARISON_COLUMNS], entries)
    rows: list[list[Any]] = []
    for run in r.results if isinstance(r, FindMaxResult) else [r]:
        n, path, host_of = run.spec.accelerators, run.spec.path, _host_of(run)
        for a in run.accelerators:
            figures = (getattr(a, c) for c in FIGURE_COLUMNS)
            rows.append([n, path, a.index, a.gpu, a.steps, *figures, run.status, host_of(a.index)])
        steps = sum(a.steps for a in run.accelerators)
        job = "all" if run.cluster is not None else ""
        rows.append([n, path, "all", "", steps, *(getattr(run, c) for c in FIGURE_COLUMNS), run.status, job])
        for h in run.cluster.hosts if run.cluster is not None else []:
            host = (h.au, h.passed, h.samples_per_s, h.mb_per_s, "", h.io_wait_p99_s, "", "")
            rows.append([h.accelerators, path, "all", "", "", *host, run.status, h.host])
    return table_csv(["accelerators", "path", "accelerator", "gpu", "steps", *FIGURE_COLUMNS, "status", "host"], rows)


def train_text(r: TrainResult | FindMaxResult | TrainComparison) -> list[Any]:
    """A run, a search (across the ranks of an MPI job: the count a rank), or paths side by side."""
    if isinstance(r, FindMaxResult):
        job = next((run.cluster for run in r.results if run.cluster is not None), None)
        if job is not None:
            return find_max_mpi_lines(r, job.ranks)
    return train_lines(r)


def tick_text(tick: TrainTick) -> str:
    rows = tick.accelerators
    aus = [r.au for r in rows if r.au == r.au]
    au = f"AU {100 * sum(aus) / len(aus):.1f}%" if aus and len(aus) == len(rows) else "AU -"
    steps = sum(r.steps for r in rows)
    rate = tick.bytes_read / tick.t / 1e6 if tick.t > 0 else 0.0
    return f"{tick.t:6.1f} s  {len(rows)} accelerators  {steps} steps  {au}  {rate:.0f} MB/s read"
