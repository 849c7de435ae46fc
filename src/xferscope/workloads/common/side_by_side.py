"""Paths side by side for the workloads: each path's runs over one data set in rotated rounds (``rounds_of``), and
for the inference workloads their ranking by the median of a figure (lower is better: restore time, load time),
with its range; entries the verdict rule cannot tell apart are level (``level``). A path given twice is an A/A
pair."""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from xferscope.compare.rounds import path_labels, round_orders
from xferscope.stats import median_of
from xferscope.workloads.common.level import mark_level, round_figures
from xferscope.workloads.common.records import decode_as


class Entry(msgspec.Struct, kw_only=True):
    """One side of a ranking: a path of one command over its rounds, a saved run, a host of a saved MPI job."""

    label: str
    path: str
    runs: int
    value: float | None  # the median of the runs' figure
    low: float | None
    high: float | None
    gb_per_s: float | None = None  # the median of the runs' rate
    cpu_s_per_gib: float | None = None  # the median of the runs' CPU cost
    beside: float | None = None  # the median of the runs' second figure, shown beside (checkpoint: restore time)
    values: list[float] = []  # each run's figure, in the order measured
    level_with: list[str] = []


E = TypeVar("E", bound=Entry)


class Ranked(msgspec.Struct, kw_only=True):
    """Paths run in rotated rounds over one data set, ranked (``entries``), with every run's record (``results``,
    of the kind's own record type)."""

    kind: str
    schema_version: int = 1
    rounds: int
    entries: list[Entry]
    results: list[Any]
    status: str = "ok"

    @property
    def spec(self) -> Any:
        return self.results[0].spec


@dataclasses.dataclass(frozen=True)
class HostRun:
    """A host of a saved MPI job, ranked beside the job (``label@host``): its own figure, the one beside, GB/s."""

    figure: float | None
    beside: float | None = None
    gb_per_s: float | None = None
    status: str = "ok"
    cpu_s_per_gib: float | None = None


def add_hosts(
    runs: dict[str, tuple[str, list[Any]]],
    label: str,
    path: str,
    hosts: Sequence[tuple[str, float | None, float | None, float | None]],
) -> None:
    """Each host of a saved MPI job (its name, figure, figure beside, GB/s) as one more entry, ``label@host``."""
    for host, figure, beside, rate in hosts:
        runs[f"{label}@{host}"] = (path, [HostRun(figure, beside, rate)])


def saved_runs(files: Sequence[str], runs_of: Callable[[str], list[Any]]) -> dict[str, tuple[str, list[Any]]]:
    """Saved files' runs (``runs_of(file)``: a run, or every path of a side-by-side) by label: the file's name, with
    the path where the file holds several; an MPI job's hosts beside it (``label@host``)."""
    runs: dict[str, tuple[str, list[Any]]] = {}
    for f in files:
        name = os.path.basename(f)
        results = runs_of(f)
        paths = {r.spec.path for r in results}
        for r in results:
            label = name if len(paths) == 1 else f"{name}:{r.spec.path}"
            runs.setdefault(label, (r.spec.path, []))[1].append(r)
            add_hosts(runs, label, r.spec.path, r.host_rows())
    return runs


def session_runs(
    results: Sequence[Any], saved: Sequence[tuple[str, Any]], keep: Callable[[Any], bool] = lambda r: True
) -> dict[str, tuple[str, list[Any]]]:
    """The console's runs by label: this session's finished ones (``N path``), then saved ones opened (their
    label as opened, an MPI job's hosts beside it); ``keep``: which of them the ranking takes."""
    runs: dict[str, tuple[str, list[Any]]] = {}
    for i, r in enumerate(results, 1):
        if keep(r):
            runs[f"{i} {r.spec.path}"] = (r.spec.path, [r])
    for label, r in saved:
        if keep(r):
            runs.setdefault(label, (r.spec.path, []))[1].append(r)
            add_hosts(runs, label, r.spec.path, r.host_rows())
    return runs


def saved_records(path: str, files: Mapping[str, type], what: str) -> list[Any]:
    """A saved file's records: its run, or every run of its side-by-side (a ``Ranked``), read as the type its
    ``kind`` has in ``files`` (a workload's kinds of file); ``what``: its runs as a sentence names them ("a
    kvcache")."""
    with open(path, "rb") as fh:
        raw = fh.read()
    record = files[msgspec.json.decode(raw)["kind"]]
    if issubclass(record, Ranked):
        return list(decode_as(record, raw, path, f"{what} comparison").results)
    return [decode_as(record, raw, path, f"{what} result")]


def entries(
    runs: dict[str, tuple[str, list[Any]]],
    figure: Callable[[Any], float | None],
    *,
    paired: bool = False,
    beside: Callable[[Any], float | None] | None = None,
) -> list[Entry]:
    """``runs``: label -> (path, its results); ranked, the lowest median first. ``paired``: the runs were
    measured in the same rounds (so the verdict rule compares them round by round); ``beside``: a second figure,
    its median shown beside."""
    out = []

    def figure_of(r: Any) -> float | None:
        return r.figure if isinstance(r, HostRun) else figure(r)

    def beside_of(r: Any) -> float | None:
        return r.beside if isinstance(r, HostRun) else beside(r) if beside else None

    for label, (path, results) in runs.items():
        values = [v for r in results if (v := figure_of(r)) is not None and r.status == "ok"]
        ok = [r for r in results if r.status == "ok"]
        out.append(
            Entry(
                label=label,
                path=path,
                runs=len(results),
                value=statistics.median(values) if values else None,
                low=min(values) if values else None,
                high=max(values) if values else None,
                gb_per_s=median_of([r.gb_per_s for r in ok]),
                cpu_s_per_gib=median_of([r.cpu_s_per_gib for r in ok]),
                beside=median_of([beside_of(r) for r in ok]) if beside else None,
                values=values,
            )
        )
    return rank(out, paired=paired)


def rank(
    entries: list[E],
    *,
    paired: bool,
    higher_is_better: bool = False,
    first: Callable[[E], float] | None = None,
    apart: Callable[[E, E], bool] | None = None,
) -> list[E]:
    """The one ranking of every workload: the best median first (the lowest, or the highest where
    ``higher_is_better``: AU), after ``first`` where given (a search's accelerators kept, most first), each entry
    marked with those the verdict rule cannot tell apart from it (``level``; ``apart``: told apart whatever their
    figures). ``paired``: the entries' runs were measured in the same rounds."""
    sign = -1.0 if higher_is_better else 1.0
    out = sorted(entries, key=lambda e: (first(e) if first else 0.0, e.value is None, sign * (e.value or 0.0)))
    mark_level(
        out,
        lambda e: round_figures(e.values, e.low, e.value, e.high, len(e.values) or e.runs),
        paired=paired,
        higher_is_better=higher_is_better,
        apart=apart,
    )
    return out


def rounds_of(
    spec: Any, paths: Sequence[str], rounds: int, run: Callable[[Any], Any], stopped: Callable[[], bool]
) -> tuple[dict[str, tuple[str, list[Any]]], list[Any], str]:
    """Each path's run (``run(spec with that path)``) once a round, the order rotated each round; each label's
    (path, results), every result in the order measured, and the status (interrupted or failed ends the rounds).
    Ctrl-C wherever it lands ends the rounds with the runs finished until then."""
    labels = path_labels(paths)
    runs: dict[str, tuple[str, list[Any]]] = {lab: (p, []) for lab, p in zip(labels, paths)}
    results: list[Any] = []
    status = "ok"
    try:
        for order in round_orders(len(labels), rounds):
            for i in order:
                if stopped():
                    raise KeyboardInterrupt
                result = run(dataclasses.replace(spec, path=paths[i]))
                runs[labels[i]][1].append(result)
                results.append(result)
                if result.status != "ok":
                    status = result.status
                    break
            if status != "ok":
                break
    except KeyboardInterrupt:  # between two runs (or before a run's process started): the rounds so far stand
        status = "interrupted"
    return {k: v for k, v in runs.items() if v[1]}, results, status


def in_rounds(
    spec: Any,
    paths: Sequence[str],
    rounds: int,
    run: Callable[[Any], Any],
    stopped: Callable[[], bool],
    figure: Callable[[Any], float | None],
    beside: Callable[[Any], float | None] | None = None,
) -> tuple[list[Entry], list[Any], str]:
    """``rounds_of``, ranked: the entries, every result in the order measured, and the status."""
    runs, results, status = rounds_of(spec, paths, rounds, run, stopped)
    return entries(runs, figure, paired=True, beside=beside), results, status
