"""The knee search: how much concurrency a path needs at one block size to reach its plateau.

    search = KneeSearch(measure, max_workers=16, max_qd=64)
    found = search.run()          # found.knee, found.plateau, found.points, found.comparisons

``measure(shape)`` runs the path once at ``shape`` (workers, queue depth) and
returns something with a ``throughput`` (any unit, higher is better). The search
never invents a figure: every number it reasons about was measured.

How it walks, by concurrency (I/Os in flight: workers x queue depth):

1. The shapes it climbs: one worker's queue filled first (host io_uring, cufile-batch: a queue keeps more in
   flight for less CPU), then more workers at the deepest queue; paths without a queue of their own climb the
   workers. The concurrency doubles: 1, 2, 4, ... up to the limit (``max_workers`` x ``max_qd``).
2. Each new point is measured in interleaved rounds with the point before it (the order rotates every round)
   until the comparison rule of ``xferscope.verdict`` tells the two apart, or ``max_rounds`` rounds are done.
   A step gains when the median of its paired ratios is 5% or more (where the rule told the two apart, that is
   its verdict; where it could not, the median decides). Doubling stops at the first step that does not gain.
3. The limit is then compared with the last point that gained: a curve that rises slowly (under 5% a
   doubling) or again at high concurrency gains there, and the plateau is taken to lie between the two.
4. Bisection between the last point below the plateau and the first on it (geometric midpoints over wide
   ranges) brings the two to within one eighth of the upper concurrency, or to neighbouring shapes: a midpoint
   is below the plateau when the point above it gains 5% over it.
5. Where the knee has several workers at the deepest queue, the same bisection finds the least queue depth on
   that many workers that stays on the plateau.

The knee is the smallest concurrency (workers x queue depth; fewer workers on a
tie) whose median throughput is within 5% of the plateau, the best median of any
point measured. At most ``max_points`` distinct points are measured per search.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from xferscope.verdict import SLOWER, Verdict, paired_verdict

GAIN = 1.05  # a step that gains less (or cannot be told apart from its neighbour) is flat
PLATEAU_SHARE = 0.95  # the knee: the smallest concurrency within 5% of the plateau
MIN_ROUNDS = 3
MAX_ROUNDS = 5
MAX_POINTS = 24

#: one line for every output that shows a knee: how it was found
SEARCH_RULE = (
    f"knee: the smallest concurrency within {100 - 100 * PLATEAU_SHARE:.0f}% of the plateau (the best "
    f"median); concurrency (one worker's queue, then workers) doubled until a step gains under "
    f"{100 * GAIN - 100:.0f}% (median of paired ratios), the limit checked, then bisected"
)


class Measured(Protocol):
    throughput: float


@dataclass(frozen=True, order=True)
class Shape:
    """How much is in flight: ``workers`` threads with ``iodepth`` I/Os each."""

    workers: int
    iodepth: int = 1

    @property
    def concurrency(self) -> int:
        return self.workers * self.iodepth

    @property
    def label(self) -> str:
        text = f"{self.workers} worker" + ("s" if self.workers != 1 else "")
        return text + (f" x qd {self.iodepth}" if self.iodepth > 1 else "")

    @property
    def short(self) -> str:
        """``w4`` or ``w2 qd16``."""
        return f"w{self.workers}" + (f" qd{self.iodepth}" if self.iodepth > 1 else "")

    def with_axis(self, axis: str, value: int) -> Shape:
        return replace(self, **{axis: value})


def sort_key(shape: Shape) -> tuple[int, int]:
    """Smaller concurrency first; on a tie, fewer workers (the cheaper way to keep as much in flight)."""
    return shape.concurrency, shape.workers


@dataclass
class Point:
    """Every measurement of one shape, in the order taken, and the stage of the search that asked for it."""

    shape: Shape
    stage: str
    measurements: list[Any] = field(default_factory=list)

    @property
    def values(self) -> list[float]:
        return [float(m.throughput) for m in self.measurements]

    @property
    def median(self) -> float:
        values = [v for v in self.values if math.isfinite(v)]
        return statistics.median(values) if values else math.nan

    @property
    def low(self) -> float:
        return min(self.values, default=math.nan)

    @property
    def high(self) -> float:
        return max(self.values, default=math.nan)


@dataclass(frozen=True)
class Comparison:
    """Interleaved rounds of two neighbours; ``baseline`` is the one with less in flight."""

    baseline: Shape
    other: Shape
    verdict: Verdict
    stage: str

    @property
    def told_apart(self) -> bool:
        return self.verdict.decided

    @property
    def gain(self) -> bool:
        """``other`` gains at least 5% over ``baseline``: the median of the paired per-round ratios. Where the rule
        told the two apart this is its verdict (faster: every round beyond its margin); where it could not by the
        round cap, the median decides, so that a noisy step looks one step further rather than miss the plateau."""
        return self.verdict.word != SLOWER and self.verdict.ratio >= GAIN


@dataclass
class SearchResult:
    points: list[Point]
    comparisons: list[Comparison]
    knee: Shape | None
    plateau: Shape | None
    #: the axes whose doubling still gained at their limit: the plateau may lie beyond (raise the limit)
    unsaturated: list[str] = field(default_factory=list)
    #: why the search ended early ("interrupted", "point budget of 24 reached", "failed: ..."); None: it finished
    stopped: str | None = None

    @property
    def measurements(self) -> int:
        return sum(len(p.measurements) for p in self.points)

    def point(self, shape: Shape | None) -> Point | None:
        return next((p for p in self.points if p.shape == shape), None)


def knee_of(points: list[Point]) -> tuple[Shape | None, Shape | None]:
    """(knee, plateau): the plateau is the point with the best median; the knee the smallest concurrency whose
    median is within 5% of it."""
    measured = [p for p in points if p.measurements and math.isfinite(p.median)]
    if not measured:
        return None, None
    best = max(measured, key=lambda p: (p.median, [-x for x in sort_key(p.shape)]))
    near = [p for p in measured if p.median >= PLATEAU_SHARE * best.median]
    knee = min(near, key=lambda p: sort_key(p.shape))
    return knee.shape, best.shape


def doubling(start: int, limit: int) -> list[int]:
    """The values after ``start`` up to ``limit``: each twice the one before, ``limit`` last."""
    out, v = [], start
    while v < limit:
        v = min(2 * v, limit)
        out.append(v)
    return out


def ladder(max_workers: int, max_qd: int) -> list[Shape]:
    """The shapes the walk climbs, by concurrency: one worker's queue filled first (a queue keeps more in flight
    for less CPU), then more workers at the deepest queue: (1, 1) .. (1, max_qd), (2, max_qd) .. (max_workers,
    max_qd). Without a queue, the workers 1 .. max_workers."""
    return [Shape(1, q) for q in range(1, max_qd + 1)] + [Shape(w, max_qd) for w in range(2, max_workers + 1)]


def midpoint(lo: int, hi: int) -> int:
    """Where bisection measures next: the geometric mean over wide ranges (throughput follows the logarithm of
    concurrency more than concurrency), the arithmetic one over narrow ones; strictly between the two."""
    mid = round(math.sqrt(lo * hi)) if hi >= 4 * lo else (lo + hi) // 2
    return min(max(mid, lo + 1), hi - 1)


def resolution(upper: int) -> int:
    """How close bisection brings its two ends: one eighth of the upper value, at least 1."""
    return max(1, upper // 8)


class StopSearch(Exception):
    """Raised by ``measure`` to end the search early (Ctrl-C, the console's stop); the points so far are kept."""

    def __init__(self, reason: str = "interrupted"):
        super().__init__(reason)
        self.reason = reason


class BudgetReached(Exception):
    pass


class KneeSearch:
    """One adaptive search at one block size. ``listener(event)`` gets ``Point`` after every measurement and
    ``Comparison`` after every finished comparison (from the thread that runs the search; it must not block)."""

    def __init__(
        self,
        measure: Callable[[Shape], Measured],
        *,
        max_workers: int,
        max_qd: int = 1,
        min_rounds: int = MIN_ROUNDS,
        max_rounds: int = MAX_ROUNDS,
        max_points: int = MAX_POINTS,
        listener: Callable[[Any], None] | None = None,
    ):
        if max_workers < 1 or max_qd < 1:
            raise ValueError("max_workers and max_qd must be 1 or more")
        if not 2 <= min_rounds <= max_rounds:
            raise ValueError("need 2 <= min_rounds <= max_rounds (one round gives no verdict)")
        if max_points < 2:
            raise ValueError("max_points must be 2 or more")
        self.measure = measure
        self.max_workers = max_workers
        self.max_qd = max_qd
        self.min_rounds = min_rounds
        self.max_rounds = max_rounds
        self.max_points = max_points
        self.listener = listener or (lambda event: None)
        self.points: dict[Shape, Point] = {}
        self.comparisons: list[Comparison] = []
        self.unsaturated: list[str] = []

    # ------------------------------------------------------------ the walk
    def run(self) -> SearchResult:
        stopped = None
        try:
            shapes = ladder(self.max_workers, self.max_qd)
            knee = self._walk(shapes)
            if knee == shapes[-1] and len(shapes) > 1:  # the knee at the limit: the plateau may lie beyond
                self.unsaturated = ["iodepth", "workers"] if self.max_qd > 1 else ["workers"]
            if self.max_qd > 1 and knee.workers > 1:
                self._queue_at(knee)
        except StopSearch as exc:
            stopped = exc.reason
        except BudgetReached:
            stopped = f"point budget of {self.max_points} reached"
        return self.result(stopped)

    def result(self, stopped: str | None = None) -> SearchResult:
        points = sorted(self.points.values(), key=lambda p: sort_key(p.shape))
        knee, plateau = knee_of(points)
        limits = {"workers": self.max_workers, "iodepth": self.max_qd}
        # an axis still gaining at its limit matters where the answer sits at that limit
        unsaturated = [
            axis for axis in self.unsaturated if plateau is not None and getattr(plateau, axis) == limits[axis]
        ]
        return SearchResult(points, list(self.comparisons), knee, plateau, unsaturated, stopped)

    def _walk(self, shapes: list[Shape]) -> Shape:
        """Along ``shapes`` (ascending concurrency): double the concurrency until a step is flat; check the last
        shape (a curve that rises slowly, or again at high concurrency, gains there); bisect between the last
        shape below the plateau and the first on it. Returns the knee along the way."""
        c = [s.concurrency for s in shapes]
        last = len(shapes) - 1
        below: int | None = None
        at = 0
        flat: int | None = None
        while at < last:
            step = min(next((j for j in range(at + 1, last + 1) if c[j] >= 2 * c[at]), last), last)
            if not self._compare(shapes[at], shapes[step], "doubling").gain:
                flat = step
                break
            below, at = at, step
        if flat is not None and flat != last and self._compare(shapes[at], shapes[last], "limit").gain:
            below, at = at, last  # the plateau lies further out: the knee is between the two
        if below is None:
            return shapes[at]
        return self._bisect(shapes, below, at, "bisection")

    def _queue_at(self, knee: Shape) -> Shape:
        """With several workers the walk reaches the knee at the deepest queue; the least depth on that many
        workers that stays on the plateau, by the same bisection."""
        shallow = Shape(knee.workers, 1)
        if not self._compare(shallow, knee, "queue depth at the knee").gain:
            return shallow
        return self._walk_between([Shape(knee.workers, q) for q in range(1, knee.iodepth + 1)])

    def _walk_between(self, shapes: list[Shape]) -> Shape:
        """Bisection alone, from ``shapes[0]`` (below the plateau) to ``shapes[-1]`` (on it)."""
        return self._bisect(shapes, 0, len(shapes) - 1, "queue depth at the knee")

    def _bisect(self, shapes: list[Shape], lo: int, hi: int, stage: str) -> Shape:
        """Between ``shapes[lo]`` (below the plateau) and ``shapes[hi]`` (on it): halve the concurrency's gap
        while it is wider than the resolution; the first shape on the plateau."""
        c = [s.concurrency for s in shapes]
        while hi - lo > 1 and c[hi] - c[lo] > resolution(c[hi]):
            target = midpoint(c[lo], c[hi])
            mid = min(range(lo + 1, hi), key=lambda j: (abs(c[j] - target), j))
            if self._compare(shapes[mid], shapes[hi], stage).gain:
                lo = mid
            else:
                hi = mid
        return shapes[hi]

    # ------------------------------------------------------- measurements
    def _compare(self, baseline: Shape, other: Shape, stage: str) -> Comparison:
        """Interleaved, rotated rounds of the two shapes until the rule settles (faster, slower or the same), or
        the cap."""
        for shape in (baseline, other):
            if shape not in self.points:
                if len(self.points) >= self.max_points:
                    raise BudgetReached
                self.points[shape] = Point(shape, stage)
        base_values: list[float] = []
        other_values: list[float] = []
        verdict = None
        for round_no in range(self.max_rounds):
            order = [(baseline, base_values), (other, other_values)]
            if round_no % 2:
                order.reverse()
            for shape, values in order:
                values.append(float(self._measure(shape).throughput))
            if round_no + 1 >= self.min_rounds:
                verdict = paired_verdict(base_values, other_values)
                if verdict.settled:
                    break
        comparison = Comparison(baseline, other, verdict, stage)
        self.comparisons.append(comparison)
        self.listener(comparison)
        return comparison

    def _measure(self, shape: Shape):
        measured = self.measure(shape)
        if not measured.throughput > 0:  # the rule compares positive figures only: a run that moved nothing
            raise StopSearch(f"failed: {shape.label} moved no data")
        point = self.points[shape]
        point.measurements.append(measured)
        self.listener(point)
        return measured
