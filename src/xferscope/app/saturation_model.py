"""What the Saturation view holds and draws: its form, the plan it makes, and the points, knees and verdicts of a
saturation as they arrive. No Textual here."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from xferscope.app.form_text import whole_number
from xferscope.errors import SpecError
from xferscope.profiles.fields import SATURATE_BASE_FIELDS
from xferscope.saturate.ceilings import verdict_line
from xferscope.saturate.execute import PointMeasured, SaturationOutcome, SeriesFinished, SeriesOutcome
from xferscope.saturate.plan import DEFAULT_DURATION, SaturatePlan, Series, plan_from
from xferscope.saturate.search import MIN_ROUNDS, InFlight, Point, knee_of
from xferscope.spec import PATHS, RunSpec
from xferscope.units import format_size, parse_duration, parse_size

#: SpecError field -> the form control that explains it
FIELD_CONTROL = {
    "path": "sat-paths",
    "paths": "sat-paths",
    "bs": "sat-bs",
    "block_size": "sat-bs",
    "max-workers": "sat-workers",
    "workers": "sat-workers",
    "max-qd": "sat-qd",
    "iodepth": "sat-qd",
    "duration": "sat-seconds",
    "rounds": "sat-rounds",
    "max-points": "sat-rounds",
    "file_size": "sat-size",
    "size": "sat-size",
    "dir": "sat-target",
    "file": "sat-target",
    "directory": "sat-target",
}


@dataclass
class SaturateFormValues:
    """The form as typed."""

    paths: str = "host"
    bs: str = "4K,1M"
    max_workers: str = "16"
    max_qd: str = "64"
    seconds: str = f"{DEFAULT_DURATION:g}"
    max_rounds: str = "5"
    target: str = ""  # a directory or file; empty: a scratch file in a temporary directory
    size: str = "1G"

    @classmethod
    def from_plan(cls, plan: SaturatePlan) -> SaturateFormValues:
        return cls(
            paths=",".join(plan.paths),
            bs=",".join(format_size(b) for b in plan.block_sizes),
            max_workers=str(plan.max_workers),
            max_qd=str(plan.max_qd),
            seconds=f"{plan.base.duration:g}",
            max_rounds=str(plan.max_rounds),
            target=plan.base.file or plan.base.directory or "",
            size=format_size(plan.base.file_size),
        )


def build_plan(values: SaturateFormValues, base: RunSpec | None = None) -> SaturatePlan:
    """The validated plan of the form (``base``: fields a profile set that the form does not show)."""
    paths = [p.strip() for p in values.paths.split(",") if p.strip()]
    for p in paths:
        if p not in PATHS:
            raise SpecError("path", f"unknown transfer path {p!r}; choose among {', '.join(PATHS)}")
    try:
        blocks = [parse_size(b.strip()) for b in values.bs.split(",") if b.strip()]
    except ValueError as exc:
        raise SpecError("bs", str(exc)) from None
    try:
        seconds = parse_duration(values.seconds)
    except ValueError as exc:
        raise SpecError("duration", str(exc)) from None
    try:
        size = parse_size(values.size.strip())
    except ValueError as exc:
        raise SpecError("size", str(exc)) from None
    if not paths or not blocks:
        raise SpecError("path" if not paths else "bs", "give at least one " + ("path" if not paths else "block size"))
    target = os.path.expanduser(values.target.strip())
    fields = {k: v for k, v in (base.to_dict() if base else {}).items() if k in SATURATE_BASE_FIELDS}
    fields.update(file_size=size, file=None, directory=None)
    if target:
        fields["directory" if os.path.isdir(target) else "file"] = target
    rounds = whole_number(values.max_rounds, "rounds")
    return plan_from(
        None,
        fields=fields,
        duration=seconds,
        paths=paths,
        block_sizes=blocks,
        gpu_sets=[list(base.gpus)] if base else None,
        max_workers=whole_number(values.max_workers, "max-workers"),
        max_qd=whole_number(values.max_qd, "max-qd"),
        max_rounds=rounds,
        min_rounds=min(MIN_ROUNDS, rounds),
    )


def log2(concurrency: int) -> float:
    return math.log2(concurrency) if concurrency > 0 else 0.0


def in_flight(x: float) -> str:
    """The x axis's label: the concurrency a log2 position stands for."""
    return f"{2**x:.0f} in flight"


@dataclass
class SeriesView:
    series: Series
    points: dict[InFlight, Point] = field(default_factory=dict)
    outcome: SeriesOutcome | None = None

    @property
    def knee(self) -> InFlight | None:
        if self.outcome is not None:
            return self.outcome.found.knee
        return knee_of(list(self.points.values()))[0]

    def curve(self) -> list[tuple[float, float]]:
        """(log2 concurrency, bytes/s): the best median at each concurrency, in order."""
        best: dict[int, float] = {}
        for p in self.points.values():
            if p.measurements and math.isfinite(p.median):
                c = p.shape.concurrency
                best[c] = max(best.get(c, 0.0), p.median * (1 << 30))
        return [(log2(c), v) for c, v in sorted(best.items())]

    def knee_point(self) -> tuple[float, float] | None:
        knee = self.knee
        point = self.points.get(knee) if knee else None
        if point is None or not point.measurements:
            return None
        return log2(knee.concurrency), point.median * (1 << 30)


class SaturationState:
    """The searches of one saturation as the console shows them, fed by the saturation's events (or by a
    saved saturation)."""

    def __init__(self) -> None:
        self.views: list[SeriesView] = []
        self.outcome: SaturationOutcome | None = None
        self.current: str = ""
        self.runs = 0

    def view(self, series: Series) -> SeriesView:
        for v in self.views:
            if v.series == series:
                return v
        v = SeriesView(series)
        self.views.append(v)
        return v

    def take(self, event) -> None:
        if isinstance(event, PointMeasured):
            self.view(event.series).points[event.point.shape] = event.point
            self.runs += 1
            self.current = f"{event.series.label} {event.point.shape.short}"
        elif isinstance(event, SeriesFinished):
            self.view(event.series).outcome = event.outcome

    def load(self, outcome: SaturationOutcome) -> None:
        self.views = []
        self.runs = 0
        for o in outcome.series:
            v = self.view(o.series)
            v.points = {p.shape: p for p in o.found.points}
            v.outcome = o
            self.runs += o.found.measurements
        self.finish(outcome)

    def finish(self, outcome: SaturationOutcome) -> None:
        self.outcome = outcome
        for o in outcome.series:
            self.view(o.series).outcome = o
        self.current = ""

    @property
    def points_measured(self) -> int:
        return sum(len([p for p in v.points.values() if p.measurements]) for v in self.views)

    def verdicts(self) -> list[tuple[Series, str, tuple[str, ...]]]:
        """(series, verdict line, advice) of every search that has one (or its error)."""
        out = []
        for v in self.views:
            o = v.outcome
            if o is not None and o.bottleneck is not None:
                out.append((v.series, verdict_line(o.evidence, o.bottleneck), o.bottleneck.advice))
            elif o is not None and o.error:
                out.append((v.series, f"{v.series.label}: {o.error}", ()))
        return out

    def rows(self) -> list[tuple[Series, InFlight, Point, str]]:
        """One row per measured point: (series, shape, point, "knee"/"").."""
        out = []
        for v in self.views:
            knee = v.knee
            for shape in sorted(v.points, key=lambda s: (s.concurrency, s.workers)):
                point = v.points[shape]
                if point.measurements:
                    out.append((v.series, shape, point, "knee" if shape == knee else ""))
        return out


def knee_marks(
    marks: list[tuple[float, str]], x_range: tuple[float, float], width: int, gutter: int
) -> list[tuple[int, str]]:
    """Cells under the chart where each knee lies: (column, colour), for ``marks`` of (x, colour)."""
    x0, x1 = x_range
    axis = width - gutter
    out = []
    if axis <= 0 or x1 <= x0:
        return out
    for x, color in marks:
        column = gutter + min(axis - 1, max(0, int((x - x0) / (x1 - x0) * axis)))
        out.append((column, color))
    return out
