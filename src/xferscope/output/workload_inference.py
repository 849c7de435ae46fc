"""KV-cache restores and model loads on the terminal and in their files: the table first, then ``--json``
(the record) and ``--csv`` (a row per run, and per GPU)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from xferscope.output.cells import ms, named_csv, secs, table_csv
from xferscope.output.files import end_of_run, show_record
from xferscope.output.job_tables import Column, gpus_cell, job_tables
from xferscope.output.terminal import clear_line, fill_line, session_to_the_end, write_status
from xferscope.report import text_table
from xferscope.units import figure_text, format_bytes
from xferscope.workloads.common.level import LEVEL_RULE
from xferscope.workloads.common.side_by_side import Entry
from xferscope.workloads.inference.kvcache import KvComparison, KvSession
from xferscope.workloads.inference.kvcache_record import BreakEven, KvResult, median_break_even
from xferscope.workloads.inference.load import LoadComparison, LoadSession
from xferscope.workloads.inference.load_record import LoadResult
from xferscope.workloads.inference.options import InferenceRequest
from xferscope.workloads.inference.transfer import TransferTick


def _gpu(g: int | None) -> str:
    return "host" if g is None else f"GPU {g}"


# ------------------------------------------------------------------ kvcache


def kv_lines(r: KvResult) -> list[Any]:
    s = r.spec
    lines: list[Any] = [
        f"workload kvcache {s.model.name}: {r.formula}",
        f"  chunks of {s.chunk_tokens} tokens ({format_bytes(r.cache.get('chunk_payload_bytes', 0))} per rank), "
        f"--tp {s.tp}, layout {s.layout}, prompts {s.prompt.text} tokens, hit ratio {s.hit_ratio:g}, "
        f"concurrency {s.concurrency}, through {s.path}",
    ]
    if r.incomplete:
        lines.append(f"  {r.status.upper()}: {r.error or 'stopped before its end'} (figures of the requests restored)")
    lines.append(
        f"  {r.requests} requests restored | restore p50 {ms(r.restore_p50_s)} p99 {ms(r.restore_p99_s)} | "
        f"{figure_text(r.gb_per_s, '{:.2f}')} GB/s | {figure_text(r.chunks_per_s, '{:.1f}')} chunks/s | {figure_text(r.tokens_per_s, '{:.0f}')} tokens/s | "
        f"{figure_text(r.cpu_s_per_gib, '{:.3f}')} CPU-s/GiB"
    )
    for g in r.per_gpu:
        lines.append(f"    {_gpu(g.gpu):>8}: {figure_text(g.gb_per_s, '{:.2f}')} GB/s ({format_bytes(g.bytes)})")
    if r.break_even is not None:
        lines.append("  " + break_even_text(r.break_even, s.chunk_tokens))
    c = r.cache
    lines.append(
        f"  cache: {c.get('chunk_files')} chunk files, {format_bytes(c.get('bytes', 0))} "
        f"({'generated' if c.get('generated') else 'read as it is'}) in {c.get('where')}"
        + (" (kept)" if c.get("kept") else "")
    )
    if r.cluster is not None:
        lines += kv_cluster_lines(r)
    if r.labels:
        lines.append("  " + "; ".join(r.labels))
    return lines


#: a KV-cache job's figures of a host and of a rank, after its requests
_KV_TIMES: list[Column] = [
    ("p50", lambda r: ms(r.restore_p50_s)),
    ("p99", lambda r: ms(r.restore_p99_s)),
    ("GB/s", lambda r: figure_text(r.gb_per_s, "{:.2f}")),
]


def kv_cluster_lines(r: KvResult) -> list[Any]:
    """An MPI job's hosts and ranks, each as it measured itself, the host of the highest p99 named."""
    c = r.cluster
    assert c is not None
    made = "once per host" if c.data_per_host else "once for all"
    how = f", the requests spread over them, the runs begun together; the cache {made}"
    return job_tables(
        c,
        how,
        [("requests", lambda h: h.requests), *_KV_TIMES],
        [("GPUs", lambda k: gpus_cell(k, "host")), ("requests", lambda k: k.requests), *_KV_TIMES],
    )


#: a KV-cache run's CSV: its own row (gpu "all"; under MPI host "all", then a row a host), then one per GPU
KV_COLUMNS = (
    "path",
    "gpu",
    "requests",
    "restore_p50_s",
    "restore_p99_s",
    "gb_per_s",
    "chunks_per_s",
    "tokens_per_s",
    "cpu_s_per_gib",
    "status",
    "host",
)


def kv_csv(r: KvResult | KvComparison) -> str:
    rows: list[list[Any]] = []
    for run in r.results if isinstance(r, KvComparison) else [r]:
        figures = [getattr(run, c) for c in KV_COLUMNS[2:-2]]  # requests .. cpu_s_per_gib
        rows.append([run.path, "all", *figures, run.status, "all" if run.cluster is not None else ""])
        for h in run.cluster.hosts if run.cluster is not None else []:
            cells = [h.requests, h.restore_p50_s, h.restore_p99_s, h.gb_per_s, "", "", ""]
            rows.append([run.path, "all", *cells, run.status, h.host])
        for g in run.per_gpu:
            rows.append([run.path, _gpu_cell(g.gpu), "", "", "", g.gb_per_s, "", "", "", run.status, ""])
    return table_csv(KV_COLUMNS, rows)


def _gpu_cell(gpu: int | None) -> int | str:
    return "host" if gpu is None else gpu


# ------------------------------------------------------------------ load


def load_lines(r: LoadResult) -> list[Any]:
    s = r.spec
    d = r.data
    what = s.model.name if s.model is not None else s.files
    lib = r.library
    lines: list[Any] = [
        f"workload load {what}: {d.get('shards')} shards, {d.get('tensors')} tensors, {format_bytes(d.get('bytes', 0))}, "
        f"{r.cache_state}, through {s.path}" + (f" (the library {lib.package} {lib.version} itself)" if lib else "")
    ]
    # a library's jobs are its shards, its checks its tensors; xferscope's paths read pieces
    unit, checked = ("shards", "tensors") if lib else ("pieces", "pieces")
    if r.incomplete:
        lines.append(
            f"  {r.status.upper()}: {r.error or 'stopped before its end'} ({r.pieces_done} of {r.pieces} {unit} landed)"
        )
    first = "first shard" if lib else "first byte"
    lines.append(
        f"  loaded in {secs(r.load_s)} | {first} {'on the GPU' if s.lands_in_gpu else 'landed'} {ms(r.first_byte_s)} | {figure_text(r.gb_per_s, '{:.2f}')} GB/s | "
        f"slowest shard {r.slowest_shard or '-'} | {figure_text(r.cpu_s_per_gib, '{:.3f}')} CPU-s/GiB"
    )
    if lib is not None:
        settings = ", ".join(f"{k}={v}" for k, v in lib.settings.items())
        lines.append(
            f"  {lib.package} {lib.version}, torch {lib.torch}: {lib.io_mode}" + (f" ({settings})" * bool(settings))
        )
    for g in r.per_gpu:
        lines.append(
            f"    {_gpu(g.gpu):>8}: {format_bytes(g.bytes)} in {secs(g.seconds)}, {figure_text(g.gb_per_s, '{:.2f}')} GB/s"
        )
    if r.shape is not None:
        lines.append(f"  shape: {r.shape.line()}")
    slow = sorted((x for x in r.shards if x.seconds is not None), key=lambda x: -(x.seconds or 0))[:3]
    if len(r.shards) > 1 and slow:
        lines.append("  slowest shards: " + ", ".join(f"{x.name} {secs(x.seconds)}" for x in slow))
    if r.verified is not None:
        v = r.verified
        lines.append(
            f"  verified: {v.pieces} {checked}, every byte as in the files"
            if not v.differ
            else f"  VERIFY FAILED: {v.differ} of {v.pieces} {checked} differ from the files (first: {v.first})"
        )
    if r.cluster is not None:
        lines += load_cluster_lines(r)
    if r.labels:
        lines.append("  " + "; ".join(r.labels))
    return lines


def load_cluster_lines(r: LoadResult) -> list[Any]:
    """An MPI job's hosts and ranks, each as it measured itself, the slowest host named."""
    c = r.cluster
    assert c is not None
    share = "each rank its own copy" if c.share == "copy" else "each rank its tensor-parallel share"
    made = "once per host" if c.data_per_host else "once for all"
    how = f", {share}, the loads begun together; the shards {made}"
    bytes_load: list[Column] = [("bytes", lambda r: format_bytes(r.bytes)), ("load", lambda r: secs(r.load_s))]
    rate: Column = ("GB/s", lambda r: figure_text(r.gb_per_s, "{:.2f}"))
    return job_tables(
        c,
        how,
        [*bytes_load, rate],
        [("GPUs", lambda k: gpus_cell(k, "host")), *bytes_load, ("first byte", lambda k: ms(k.first_byte_s)), rate],
    )


#: a model load's CSV: the run's row (gpu "all"), then one per GPU
LOAD_COLUMNS = (
    "path",
    "cache",
    "gpu",
    "load_s",
    "first_byte_s",
    "gb_per_s",
    "bytes",
    "slowest_shard",
    "cpu_s_per_gib",
    "status",
    "host",
)


def load_csv(r: LoadResult | LoadComparison) -> str:
    """A row a run (gpu "all"; under MPI host "all", then a row a host), then one a GPU."""
    rows: list[dict[str, Any]] = []
    for run in r.results if isinstance(r, LoadComparison) else [r]:
        each = {"path": run.path, "cache": run.cache_state, "status": run.status}
        figures = {c: getattr(run, c) for c in ("load_s", "first_byte_s", "gb_per_s", "slowest_shard", "cpu_s_per_gib")}
        job = "all" if run.cluster is not None else ""
        rows.append({**each, "gpu": "all", **figures, "bytes": run.bytes_read, "host": job})
        for h in run.cluster.hosts if run.cluster is not None else []:
            rows.append(
                {**each, "gpu": "all", "load_s": h.load_s, "gb_per_s": h.gb_per_s, "bytes": h.bytes, "host": h.host}
            )
        for g in run.per_gpu:
            rows.append(
                {**each, "gpu": _gpu_cell(g.gpu), "load_s": g.seconds, "gb_per_s": g.gb_per_s, "bytes": g.bytes}
            )
    return named_csv(LOAD_COLUMNS, rows)


# ------------------------------------------------------------------ side by side


def comparison_lines(
    title: str,
    entries: list[Entry],
    figure: str,
    fmt: Callable[[float | None], str],
    status: str,
    beside: str | None = None,
) -> list[Any]:
    """The entries ranked, a row each; ``beside``: the name of their second figure (shown after GB/s)."""
    rows = [
        (
            i,
            e.label,
            e.runs,
            fmt(e.value),
            "-" if e.low is None else f"{fmt(e.low)}-{fmt(e.high)}",
            figure_text(e.gb_per_s, "{:.2f}"),
            *([fmt(e.beside)] if beside else []),
            figure_text(e.cpu_s_per_gib, "{:.3f}"),
            ", ".join(e.level_with) or "-",
        )
        for i, e in enumerate(entries, 1)
    ]
    headers = ("#", "path", "runs", figure, "range", "GB/s", *([beside] if beside else []), "CPU-s/GiB", "level with")
    lines: list[Any] = [title, text_table(headers, rows, left=("path", "level with"))]
    also = f"GB/s, {beside} and CPU-s/GiB" if beside else "GB/s and CPU-s/GiB"
    lines.append(f"  ranked: the lowest median {figure} first ({also}: the medians of the same runs); {LEVEL_RULE}")
    if status != "ok":
        lines.append(f"  {status.upper()}: the rounds measured until then")
    return lines


def break_even_text(b: BreakEven, chunk_tokens: int) -> str:
    """Where restoring a prompt gets faster than recomputing it at the user's prefill rate."""
    head = f"break-even at {b.prefill_rate:g} tokens/s prefill"
    fit = f"restore = {1000 * b.fixed_s:.2f} ms + {1e6 * b.s_per_token:.2f} us a token; {b.fit}"
    if b.tokens is None:
        return (
            f"{head}: none: restoring takes {1e6 * b.s_per_token:.1f} us a token here, recomputing "
            f"{1e6 / b.prefill_rate:.1f} us ({b.fit})"
        )
    if b.tokens <= chunk_tokens:
        return f"{head}: every prompt with a chunk on disk restores faster than it recomputes ({fit})"
    return (
        f"{head}: prompts over {b.tokens} tokens restore faster than they recompute ({fit}; restores come in "
        f"chunks of {chunk_tokens})"
    )


def path_break_evens(c: KvComparison) -> list[str]:
    """With --prefill-rate and several paths: each path's break-even, from its runs."""
    lines = []
    for path in dict.fromkeys(r.path for r in c.results):
        evens = [r.break_even for r in c.results if r.path == path and r.break_even is not None]
        if evens:
            lines.append(f"  {path}: " + break_even_text(median_break_even(evens), c.spec.chunk_tokens))
    return lines


def kv_comparison_lines(c: KvComparison) -> list[Any]:
    """The paths ranked by restore time, then each path's break-even (with --prefill-rate); saved runs (no rounds)
    ranked alone."""
    if not c.rounds:
        return comparison_lines(f"{len(c.entries)} saved kvcache runs", c.entries, "restore p50", ms, c.status)
    s = c.spec
    table = comparison_lines(
        f"workload kvcache {s.model.name}: {len(c.entries)} paths, {c.rounds} rotated rounds over one cache "
        f"(layout {s.layout}, concurrency {s.concurrency}, prompts {s.prompt.text})",
        c.entries,
        "restore p50",
        ms,
        c.status,
    )
    return [*table, *path_break_evens(c)]


def library_lines(
    results: Sequence[Any],
    imitation: str = "xferscope's own reading of the shards as safetensors does (mapped, copied from pageable memory)",
) -> list[str]:
    """Which rows are the libraries themselves (``results``' ``library`` facts), and which is xferscope's imitation
    of one (``imitation``: what host does)."""
    libs = {r.path: r.library for r in results if r.library is not None}
    if not libs:
        return []
    said = ", ".join(f"{p} ({lib.package} {lib.version})" for p, lib in libs.items())
    torch = next(iter(libs.values())).torch
    lines = [f"  the libraries themselves, on torch {torch}: {said}"]
    if "host" in {r.path for r in results}:
        lines.append(f"  host: {imitation}")
    return lines


def load_comparison_lines(c: LoadComparison) -> list[Any]:
    """The paths ranked by load time, then which rows are the libraries; saved loads (no rounds) ranked alone."""
    if not c.rounds:
        return comparison_lines(f"{len(c.entries)} saved model loads", c.entries, "load time", secs, c.status)
    s = c.spec
    table = comparison_lines(
        f"workload load: {len(c.entries)} paths, {c.rounds} rotated rounds, {s.cache}",
        c.entries,
        "load time",
        secs,
        c.status,
    )
    return [*table, *library_lines(c.results)]


# ------------------------------------------------------------------ the run and its outputs


def show_kvcache(result: KvResult | KvComparison, **out: Any) -> int:
    """A restore run's record, or paths side by side (run or saved): printed, then the files asked for (``out``:
    fmt, json_path, csv_path); ExitCode.NOT_WRITTEN where one could not be written, else 0."""
    lines = kv_comparison_lines if isinstance(result, KvComparison) else kv_lines
    return show_record(result, lambda: lines(result), kv_csv, **out)


def show_load(result: LoadResult | LoadComparison, **out: Any) -> int:
    """A load's record, or paths side by side (run or saved), as ``show_kvcache``."""
    lines = load_comparison_lines if isinstance(result, LoadComparison) else load_lines
    return show_record(result, lambda: lines(result), load_csv, **out)


def _report(
    session: Any,
    paths: list[str],
    rounds: int,
    show: Callable[..., int],
    *,
    fmt: str,
    json_path: str | None,
    csv_path: str | None,
) -> None:
    live = sys.stderr.isatty() and fmt != "json"
    with session_to_the_end(session, live):
        session.prepare(fill_line if live else None, list(dict.fromkeys(paths)))
        clear_line(live)
        tick = _tick_line if live else None
        result = session.compare_paths(paths, rounds, tick) if len(paths) > 1 else session.run(on_tick=tick)
        clear_line(live)
    written = show(result, fmt=fmt, json_path=json_path, csv_path=csv_path)
    end_of_run(result.status, written, getattr(result, "error", None) or "see above")


def kvcache_and_report(request: InferenceRequest, rounds: int, **out: Any) -> None:
    """``workload kvcache`` here: its paths side by side in ``rounds`` (``out``: fmt, json_path, csv_path)."""
    _report(KvSession(request.spec), request.paths, rounds, show_kvcache, **out)


def load_and_report(request: InferenceRequest, rounds: int, **out: Any) -> None:
    """``workload load`` here, as ``kvcache_and_report``."""
    _report(LoadSession(request.spec), request.paths, rounds, show_load, **out)


def _tick_line(tick: TransferTick) -> None:
    write_status(f"\r\033[K{tick.t:6.1f} s  {tick.jobs} done")
