"""Per-point ratios of a sweep against earlier results: this run's median over the old figure.

The old file may be a sweep results file (its medians are used), or any file of
xferscope results (run, compare, import of gdsio/fio/elbencho: several results for
one point give their median), or, for memory sweeps, ``mem --json`` / ``import mlc
--json`` output. Points match by what they measure (path, pattern, block size,
workers, depth, mix, GPUs; for memory: traffic, stride, delay and backend), never
by where or how long.

A point's verdict against the old file follows ``xferscope.compare.verdict.repeated_verdict``: slower (a
regression) only when every repetition of this run is below every earlier one by more than the margin, so
one noisy point, or a point measured once on either side, is never called a regression.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from xferscope import records
from xferscope.compare.verdict import MARGIN, SLOWER, Verdict, repeated_verdict
from xferscope.errors import FormatError
from xferscope.export import read_json
from xferscope.records import PointIdentity
from xferscope.stats import median_of
from xferscope.sweep.plan import key_of
from xferscope.sweep.record import SCHEMA, ResultsFile
from xferscope.sweep.stats import io_stats, mem_rows, mem_where, ok_repetitions


@dataclass
class Ratio:
    key: str  # point key (io) or point key plus delay (mem)
    label: str
    new: float | None  # this run's median (MiB/s for io, MB/s for memory bandwidth)
    old: float | None
    new_latency: float | None = None  # mean latency (us for io, ns for memory)
    old_latency: float | None = None
    new_values: tuple[float, ...] = ()  # every repetition's figure, this run
    old_values: tuple[float, ...] = ()  # and the earlier file's
    margin: float = MARGIN  # the verdict rule's margin m (--margin)

    @property
    def verdict(self) -> Verdict | None:
        """This run against the earlier one under the repeated-figures rule; None without a match."""
        new = [v for v in self.new_values if v and v > 0 and math.isfinite(v)]
        old = [v for v in self.old_values if v and v > 0 and math.isfinite(v)]
        return repeated_verdict(old, new, self.margin) if new and old else None

    @property
    def ratio(self) -> float | None:
        if self.new is None or self.old is None or not self.old or math.isnan(self.new) or math.isnan(self.old):
            return None
        return self.new / self.old

    @property
    def latency_ratio(self) -> float | None:
        if not self.new_latency or not self.old_latency:
            return None
        return self.new_latency / self.old_latency


def mem_key(identity: PointIdentity, traffic: str, stride: Any, delay: Any, **where: Any) -> str:
    """A memory point's key: mode, backend, traffic, stride, delay, and where it measured (``mem_where``)."""
    return key_of(
        {
            "mode": identity.get("mode"),
            "traffic": traffic,
            "stride": stride,
            "backend": identity.get("backend"),
            "delay": delay,
            **{k: v for k, v in where.items() if v is not None},
        }
    )


class OldResults:
    """Figures of an earlier file by point key: (throughput or bandwidth, mean latency)."""

    def __init__(self, path: str, kind: str):
        self.path = path
        self.kind = kind
        self.figures: dict[str, tuple[float | None, float | None]] = {}
        self.values: dict[str, tuple[float, ...]] = {}  # every repetition's throughput or bandwidth
        data = read_json(path)
        if isinstance(data, dict) and data.get("schema") == SCHEMA:
            self._from_sweep(records.check("sweep", data, path))
        elif kind == "mem":
            self._from_mem(records.check("mem", data, path) if records.kind_of(data) == "mem" else data)
        else:
            self._from_results(path)
        if not self.figures:
            raise FormatError(
                path, None, f"holds no {'memory sweep' if kind == 'mem' else 'transfer'} results to compare against"
            )

    def _from_sweep(self, data: dict) -> None:
        if data.get("kind", "io") != self.kind:
            raise FormatError(self.path, None, f"holds a {data.get('kind')} sweep; this one is {self.kind}")
        for point in data.get("points", []):
            reps = point.get("repetitions") or []
            if self.kind == "io":
                st = io_stats(reps)
                self.figures[point["key"]] = (st["throughput_mib_s"]["median"], st["lat_mean_us"]["median"])
                self.values[point["key"]] = io_values(reps)
                continue
            identity = point.get("identity") or {}
            for row in mem_rows(reps):
                key = mem_key(identity, row["traffic"], row["stride"], row["delay"], **mem_where(row))
                self.figures[key] = (row["bandwidth_mb_s"]["median"], row["latency_ns"]["median"])
            for key, values in mem_values(identity, reps).items():
                self.values[key] = values

    def _from_mem(self, data: Any) -> None:
        if not isinstance(data, dict) or not isinstance(data.get("points"), list):
            raise FormatError(
                self.path, None, "not a memory sweep result (mem --json, import mlc --json, or a replay results file)"
            )
        mode = (data.get("spec") or {}).get("mode", "loaded")
        identity: PointIdentity = {"mode": mode, "backend": data.get("backend", "builtin")}
        for p in data["points"]:
            key = mem_key(identity, p.get("traffic"), p.get("stride"), p.get("delay"), **mem_where(p))
            self.figures[key] = (p.get("bandwidth_mb_s"), p.get("latency_ns"))
            self.values[key] = _positive([p.get("bandwidth_mb_s")])

    def _from_results(self, path: str) -> None:
        from xferscope.export import load_results
        from xferscope.profiles.model import point_identity

        groups: dict[str, list] = {}
        for r in load_results(path):
            if r.status == "ok":
                key = key_of(point_identity(r.spec))
                groups.setdefault(key, []).append(r)
        for key, results in groups.items():
            self.figures[key] = (
                median_of([r.throughput_mib_s for r in results]),
                median_of([r.latency_us.mean for r in results]),
            )
            self.values[key] = _positive([r.throughput_mib_s for r in results])


def ratios(results: ResultsFile, old: OldResults, margin: float = MARGIN) -> list[Ratio]:
    """One ratio per measured point (per delay for memory sweeps) of this run, in grid order; ``margin`` is
    the verdict rule's m."""
    out: list[Ratio] = []
    for rec in results.planned():
        if not rec.ok_count():
            continue
        if results.kind == "io":
            st = io_stats(rec.repetitions)
            before = old.figures.get(rec.key, (None, None))
            out.append(
                Ratio(
                    rec.key,
                    rec.label,
                    st["throughput_mib_s"]["median"],
                    before[0],
                    st["lat_mean_us"]["median"],
                    before[1],
                    io_values(rec.repetitions),
                    old.values.get(rec.key, ()),
                    margin,
                )
            )
            continue
        new_values = mem_values(rec.identity, rec.repetitions)
        for row in mem_rows(rec.repetitions):
            key = mem_key(rec.identity, row["traffic"], row["stride"], row["delay"], **mem_where(row))
            before = old.figures.get(key, (None, None))
            delay = "idle" if row["delay"] is None else f"delay {row['delay']}"
            out.append(
                Ratio(
                    key,
                    f"{row['traffic']} stride {row['stride']} {delay}",
                    row["bandwidth_mb_s"]["median"],
                    before[0],
                    row["latency_ns"]["median"],
                    before[1],
                    new_values.get(key, ()),
                    old.values.get(key, ()),
                    margin,
                )
            )
    return out


def below(found: list[Ratio], threshold: float) -> list[Ratio]:
    """The regressions: points whose verdict is slower and whose ratio is under ``threshold`` (points without
    a match in the old file, or without a verdict, are not counted)."""
    return [
        r
        for r in found
        if r.ratio is not None and r.ratio < threshold and r.verdict is not None and r.verdict.word == SLOWER
    ]


def below_without_verdict(found: list[Ratio], threshold: float) -> list[Ratio]:
    """Points under ``threshold`` that the rule does not call slower (same, undecided, or one repetition)."""
    return [r for r in found if r.ratio is not None and r.ratio < threshold and r not in below(found, threshold)]


def _positive(values) -> tuple[float, ...]:
    return tuple(float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0)


def io_values(reps: list[dict]) -> tuple[float, ...]:
    """The throughput (MiB/s) of each finished repetition of an io point."""
    return _positive(r.get("throughput_mib_s") for r in ok_repetitions(reps))


def mem_values(identity: PointIdentity, reps: list[dict]) -> dict[str, tuple[float, ...]]:
    """The bandwidth (MB/s) of each finished repetition, per (traffic, stride, delay) of a memory point."""
    groups: dict[str, list] = {}
    for rep in ok_repetitions(reps):
        for p in rep.get("points", []):
            key = mem_key(identity, p.get("traffic"), p.get("stride"), p.get("delay"), **mem_where(p))
            groups.setdefault(key, []).append(p.get("bandwidth_mb_s"))
    return {key: _positive(values) for key, values in groups.items()}
