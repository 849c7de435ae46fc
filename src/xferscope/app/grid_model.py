"""A profile's grid in the console, without any Textual: its points, the statistics of their repetitions
(``xferscope.sweep.stats``, as ``replay`` computes them), and what the lines and the heatmap show.

The varying fields are those whose values differ between the points; throughput is drawn against block
size when it varies (else the numeric field with the most values, else the first varying field), one line
(or heatmap row) per combination of the other varying fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xferscope.compare.verdict import SINGLE_PASS, Verdict, repeated_verdict
from xferscope.export import result_to_dict
from xferscope.profiles.model import point_identity
from xferscope.spec import RunSpec
from xferscope.sweep.against import io_values
from xferscope.sweep.plan import combo_text
from xferscope.sweep.plot import NUMERIC_AXES
from xferscope.sweep.stats import io_stats

MIB = 1 << 20


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _identity(spec: RunSpec) -> dict[str, object]:
    return {k: _hashable(v) for k, v in point_identity(spec).items()}


def varying_fields(specs: Sequence[RunSpec]) -> list[str]:
    """The identity fields whose value differs between ``specs``, in identity order, leaving out those
    that follow from an earlier one (the GPUs of host against bounce follow from the path)."""
    ids = [_identity(s) for s in specs]
    varying = [k for k in ids[0] if len({i[k] for i in ids}) > 1] if ids else []

    def follows(a: str, b: str) -> bool:  # each value of b comes with one value of a
        seen: dict = {}
        return all(seen.setdefault(i[b], i[a]) == i[a] for i in ids)

    return [a for n, a in enumerate(varying) if not any(follows(a, b) for b in varying[:n])]


def value_text(axis: str, value: Any) -> str:
    return combo_text({axis: value}).split("=", 1)[1]


@dataclass
class PointStats:
    """One grid point: its varying values, how many repetitions ran, and their statistics."""

    index: int  # 1-based, in run order
    values: dict[str, object]  # the varying fields' values
    label: str
    planned: int  # repetitions asked for
    done: int  # repetitions that finished ("ok")
    state: str  # waiting, running, done, failed
    throughput: dict[str, float]  # MiB/s: median, stdev, min, max, n
    p99_us: dict[str, float]
    figures: tuple[float, ...] = ()  # MiB/s of each finished repetition


class GridRun:
    """The runs of one grid batch (``RunRecord``s with ``point`` and ``repetition``)."""

    @staticmethod
    def is_grid(specs: Sequence[RunSpec], repetitions: int) -> bool:
        """A grid is worth drawing when points repeat, or vary in more than the path (paths alone are the
        comparison's business)."""
        return repetitions > 1 or any(s.replace(path=specs[0].path) != specs[0] for s in specs)

    def __init__(self, records: list):
        self.records = records
        by_point: dict[int, list] = {}
        for r in records:
            by_point.setdefault(r.point, []).append(r)
        self.point_records = [by_point[k] for k in sorted(by_point)]
        self.specs = [recs[0].spec for recs in self.point_records]
        self.identities = [_identity(s) for s in self.specs]
        self.axes = varying_fields(self.specs)
        numeric = [a for a in self.axes if a in NUMERIC_AXES or a == "rwmix"]
        if "block_size" in self.axes:
            self.x_axis: str | None = "block_size"
        elif numeric:
            self.x_axis = max(numeric, key=lambda a: len({i[a] for i in self.identities}))
        else:
            self.x_axis = self.axes[0] if self.axes else None
        self.series_axes = [a for a in self.axes if a != self.x_axis]
        xs = list(dict.fromkeys(i[self.x_axis] for i in self.identities)) if self.x_axis else [None]
        self.x_values = sorted(xs) if self.x_axis in numeric else xs
        self.series_keys = list(dict.fromkeys(self._series_key(i) for i in self.identities))
        self._dicts: dict[int, dict] = {}
        self._stats: dict[int, tuple[tuple, PointStats]] = {}  # per point, until one of its runs changes

    # ---------------------------------------------------------------- layout
    @property
    def repetitions(self) -> int:
        return max((r.repetitions for r in self.records), default=1)

    @property
    def heatmap_default(self) -> bool:
        """Two varying numeric fields read best as a heatmap; anything else as lines."""
        return len(self.axes) == 2 and all(a in NUMERIC_AXES or a == "rwmix" for a in self.axes)

    def _series_key(self, identity: Mapping[str, object]) -> tuple:
        return tuple(identity[a] for a in self.series_axes)

    def series_label(self, key: tuple) -> str:
        if not self.series_axes:
            return self.specs[0].name if not self.axes else "median"
        return combo_text(dict(zip(self.series_axes, key)))

    def x_text(self, value: Any) -> str:
        return value_text(self.x_axis, value) if self.x_axis else "point"

    def describe(self, heatmap: bool = False) -> str:
        """'against block_size, a line per path' for the view's title."""
        if self.x_axis is None:
            return "one point"
        per = f", a {'row' if heatmap else 'line'} per {'+'.join(self.series_axes)}" if self.series_axes else ""
        return f"against {self.x_axis}{per}"

    # ------------------------------------------------------------ statistics
    def _rep_dicts(self, records: list) -> list[dict]:
        out = []
        for r in records:
            if r.result is None:
                continue
            d = self._dicts.get(r.run_id)
            if d is None:
                d = self._dicts[r.run_id] = result_to_dict(r.result)
            out.append(d)
        return out

    def points(self) -> list[PointStats]:
        out = []
        for i, (records, identity) in enumerate(zip(self.point_records, self.identities), start=1):
            key = tuple((r.state, r.result is not None) for r in records)
            cached = self._stats.get(i)
            if cached is not None and cached[0] == key:
                out.append(cached[1])
                continue
            reps = self._rep_dicts(records)
            stats = io_stats(reps)
            states = {r.state for r in records}
            if states <= {"queued"}:
                state = "waiting"
            elif states & {"queued", "preparing", "running"}:
                state = "running"
            elif stats["throughput_mib_s"]["n"]:
                state = "done"
            else:
                state = "failed" if "failed" in states else "stopped"
            values = {a: identity[a] for a in self.axes}
            label = combo_text(values) if values else records[0].spec.name
            point = PointStats(
                i,
                values,
                label,
                len(records),
                int(stats["throughput_mib_s"]["n"]),
                state,
                stats["throughput_mib_s"],
                stats["lat_p99_us"],
                io_values(reps),
            )
            self._stats[i] = (key, point)
            out.append(point)
        return out

    def lines(self, points: list[PointStats] | None = None) -> list[tuple[str, list[tuple[float, dict]]]]:
        """(series label, [(x position, throughput statistics)]) of the measured points, x ascending;
        x positions are indices into ``x_values`` (evenly spaced: grids step in powers of two)."""
        points = self.points() if points is None else points
        out = []
        for key in self.series_keys:
            line = []
            for p, identity in zip(points, self.identities):
                if self._series_key(identity) != key or not p.done:
                    continue
                x = self.x_values.index(identity[self.x_axis]) if self.x_axis else 0
                line.append((float(x), p.throughput))
            out.append((self.series_label(key), sorted(line, key=lambda xy: xy[0])))
        return out

    def cells(self, points: list[PointStats] | None = None) -> list[tuple[str, list[PointStats | None]]]:
        """Heatmap rows: (series label, the point at each x value, or None where the grid has none)."""
        points = self.points() if points is None else points
        rows = []
        for key in self.series_keys:
            row: list[PointStats | None] = [None] * len(self.x_values)
            for p, identity in zip(points, self.identities):
                if self._series_key(identity) == key:
                    row[self.x_values.index(identity[self.x_axis]) if self.x_axis else 0] = p
            rows.append((self.series_label(key), row))
        return rows


def point_verdict(point: PointStats, baseline: PointStats) -> Verdict | None:
    """``point`` against ``baseline`` under the rule for repetitions run one after another (the words of
    ``compare`` and ``replay --against``); None for the baseline itself or before both have a figure."""
    if point.index == baseline.index or not point.figures or not baseline.figures:
        return None
    return repeated_verdict(baseline.figures, point.figures)


def verdict_text(point: PointStats, baseline: PointStats) -> str:
    """'0.83 slower', '1.02 same', '0.37 no verdict' (one repetition on a side: the rule line under the
    table says why), 'baseline', or '-'."""
    if point.index == baseline.index:
        return "baseline"
    v = point_verdict(point, baseline)
    if v is None:
        return "-"
    return f"{v.ratio:.2f} {'no verdict' if v.word == SINGLE_PASS else v.word}"


def spread_text(stats: dict[str, float]) -> str:
    """'± 3.1%' of the median: the standard deviation over repetitions, relative."""
    med, sd = stats.get("median", math.nan), stats.get("stdev", math.nan)
    if not stats.get("n") or math.isnan(med) or med <= 0 or math.isnan(sd):
        return ""
    return f"±{100 * sd / med:.1f}%"
