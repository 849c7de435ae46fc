"""Training-input runs side by side: the paths of one command in rotated rounds over one data set, or saved
results (xferscope's records and DLIO's ``summary.json``), ranked by AU and by the accelerators they sustain.

A ranking says which is ahead and by what spread; two that the verdict rule cannot tell apart (``level``: paired
by round where they ran in the same rounds, else over their AU ranges) are called level, not ranked apart: one
pass of A against B on a shared disk can flip, and an AU near 100% has no room to differ.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from xferscope.errors import FormatError
from xferscope.stats import median_of
from xferscope.workloads.common.side_by_side import Entry
from xferscope.workloads.common.side_by_side import rank as rank_entries
from xferscope.workloads.train.train_record import KIND, SCHEMA_VERSION, FindMaxResult, TrainResult, decode

#: DLIO's summary gives I/O in MiB/s (record_length / 1024 / 1024): MB/s = MiB/s x this
MIB_IN_MB = (1 << 20) / 1e6
#: what makes DLIO's summary.json one of a training run: its mean AU
DLIO_AU = "train_au_mean_percentage"


class TrainEntry(Entry, kw_only=True, rename={"value": "au", "low": "au_min", "high": "au_max", "values": "aus"}):
    """One side of a training comparison: a path of this command (over its rounds), or a saved result. Its figure
    is AU (0-1; in its file ``au``, ``au_min``, ``au_max``, ``aus``: the median, the range and each run's); its
    path a path's name or "host memory (DLIO)". The fields the file renames are declared again here, as msgspec
    renames only a class's own fields."""

    value: float | None
    low: float | None
    high: float | None
    values: list[float] = msgspec.field(default_factory=list)
    source: str  # "xferscope" or "dlio"
    workload: str | None
    accelerators: int | None
    au_threshold: float | None
    passed: bool | None
    samples_per_s: float | None
    mb_per_s: float | None
    sustained: int | None = None  # --find-max: the most accelerators at the threshold

    def __post_init__(self) -> None:
        self.gb_per_s = None if self.mb_per_s is None else self.mb_per_s / 1e3  # the rate every entry gives


class TrainComparison(msgspec.Struct, kw_only=True):
    schema_version: int = SCHEMA_VERSION
    kind: str = KIND + "-comparison"
    rounds: int
    entries: list[TrainEntry]  # ranked: most accelerators sustained first, then the highest AU
    results: list[TrainResult] = []
    searches: list[FindMaxResult] = []
    status: str = "ok"  # "interrupted": the rounds measured before Ctrl-C

    @property
    def spec(self):
        return (self.results or [s.results[0] for s in self.searches])[0].spec


def entry_of_runs(label: str, results: Sequence[TrainResult]) -> TrainEntry:
    first = results[0]
    aus = [r.au for r in results if r.au is not None]
    au = median_of(aus)
    ranks = first.cluster.ranks if first.cluster is not None else 1
    return TrainEntry(
        label=label,
        source="xferscope" if ranks == 1 else f"xferscope, {ranks} ranks",
        workload=first.spec.preset,
        path=first.spec.path,
        accelerators=first.spec.accelerators,
        runs=len(results),
        value=au,
        low=min(aus) if aus else None,
        high=max(aus) if aus else None,
        au_threshold=first.au_threshold,
        passed=None if au is None else au >= first.au_threshold,
        samples_per_s=median_of([r.samples_per_s for r in results]),
        mb_per_s=median_of([r.mb_per_s for r in results]),
        cpu_s_per_gib=median_of([r.cpu_s_per_gib for r in results]),
        values=aus,
    )


def host_entries(label: str, result: TrainResult) -> list[TrainEntry]:
    """An MPI job's hosts, each as one more entry beside the job's (``label@host``)."""
    c = result.cluster
    if c is None:
        return []
    return [
        TrainEntry(
            label=f"{label}@{h.host}",
            source=f"xferscope, {len(h.ranks)} of {c.ranks} ranks",
            workload=result.spec.preset,
            path=result.spec.path,
            accelerators=h.accelerators,
            runs=1,
            value=h.au,
            low=h.au,
            high=h.au,
            au_threshold=result.au_threshold,
            passed=h.passed,
            samples_per_s=h.samples_per_s,
            mb_per_s=h.mb_per_s,
            values=[] if h.au is None else [h.au],
        )
        for h in c.hosts
    ]


def entry_of_search(label: str, search: FindMaxResult) -> TrainEntry:
    at_best = [r for r in search.results if r.spec.accelerators == search.best] or search.results[:1]
    e = entry_of_runs(label, at_best)
    e.sustained = search.best
    return e


def rank(entries: list[TrainEntry], *, paired: bool = False) -> list[TrainEntry]:
    """Most accelerators sustained first, then the highest AU, by the ranking and level rule of every workload
    (``side_by_side.rank``; searches that sustained different counts are apart). ``paired``: the entries' runs
    were measured in the same rounds."""
    return rank_entries(
        entries,
        paired=paired,
        higher_is_better=True,
        first=lambda e: -(e.sustained or 0),
        apart=lambda a, b: a.sustained != b.sustained,
    )


# ------------------------------------------------------------------ saved results


def _dlio_entry(label: str, data: dict[str, Any]) -> TrainEntry:
    metric = data.get("metric")
    if not isinstance(metric, dict) or DLIO_AU not in metric:
        raise KeyError(f"metric.{DLIO_AU}")
    aus = [float(a) / 100 for a in metric.get("train_au_percentage") or [metric[DLIO_AU]]]
    meet = metric.get("train_au_meet_expectation")
    io = metric.get("train_io_mean_MB_per_second")
    rate = metric.get("train_throughput_mean_samples_per_second")
    return TrainEntry(
        label=label,
        source="dlio",
        workload=data.get("workload") or data.get("model"),
        path="host memory (DLIO)",
        accelerators=data.get("num_accelerators"),
        runs=len(aus),
        value=float(metric[DLIO_AU]) / 100,
        low=min(aus),
        high=max(aus),
        au_threshold=None,
        passed=None if meet is None else meet == "success",
        samples_per_s=None if rate is None else float(rate),
        mb_per_s=None if io is None else float(io) * MIB_IN_MB,
    )


def load_entries(path: str) -> list[TrainEntry]:
    """A saved training result, a --find-max search, a comparison (its entries), or DLIO's ``summary.json``; a
    file that is none of them is one line naming the file and what is missing."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise FormatError(path, None, f"cannot read it: {exc.strerror}") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise FormatError(path, None, f"not JSON: {exc}") from None
    label = path.rsplit("/", 1)[-1]
    if isinstance(data, dict) and data.get("kind") == KIND:
        result = decode(raw, path)
        return [entry_of_runs(label, [result]), *host_entries(label, result)]
    if isinstance(data, dict) and data.get("kind") == KIND + "-comparison":
        try:
            compared = msgspec.json.decode(raw, type=TrainComparison)
        except msgspec.ValidationError as exc:
            raise FormatError(path, None, f"not a comparison xferscope can read: {exc}") from None
        for e in compared.entries:
            e.label, e.level_with = f"{label}:{e.label}", []
        return compared.entries
    if isinstance(data, dict) and data.get("kind") == KIND + "-find-max":
        try:
            search = msgspec.json.decode(raw, type=FindMaxResult)
        except msgspec.ValidationError as exc:
            raise FormatError(path, None, f"not a --find-max result xferscope can read: {exc}") from None
        return [entry_of_search(label, search)]
    if isinstance(data, dict) and "metric" in data:
        try:
            return [_dlio_entry(label, data)]
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(path, None, f"not a DLIO summary.json: {exc} is missing or not a number") from None
    raise FormatError(
        path, None, "neither a result of `workload train --json` nor DLIO's summary.json (no kind, no metric)"
    )
