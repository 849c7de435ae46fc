"""The knee search: how much concurrency a path needs at one block size to reach its plateau.

    search = KneeSearch(measure, max_workers=16, max_qd=64)
    found = search.run()          # found.knee, found.plateau, found.flat, found.points, found.comparisons

``measure(shape)`` runs the path once at ``shape`` (workers, queue depth) and
returns something with a ``throughput`` (any unit, higher is better). The search
never invents a figure: every number it reasons about was measured.

How it walks, by concurrency (I/Os in flight: workers x queue depth):

1. **Climb.** The ladders it climbs, doubling the concurrency: workers at queue depth 1, and, for paths with a
   queue of their own (host io_uring, cufile-batch), one worker's queue filled first, then more workers at the
   deepest queue. Each new point is measured in interleaved rounds with the point before it (the order rotated
   every round) until the rule of ``xferscope.compare.verdict`` settles, or the round cap. A step gains when the
   median of its paired ratios is 5% or more and the rule does not call it slower. A ladder stops after two
   steps in a row that do not gain (one noisy step does not end it), then its limit is checked against the
   last point that gained (a curve that rises slowly, or again at high concurrency, gains there).
2. **FoundPlateau.** The best median of a flat curve is luck (the winner's curse), so the plateau is not the best
   point: it is the median of the medians of every point that the rule for unpaired figures cannot tell from
   the best, and its point is the one of those whose median lies nearest it.
3. **Knee.** The smallest concurrency that the verdict rule, in paired rounds (up to ``KNEE_ROUNDS``) against the
   best point as ``compare`` runs them, does not call slower: the rounds measure the best point afresh, so its
   luck stays in its old figures. The candidates are tried from the least concurrency up, then
   bisection between the last point called slower and the first not brings the two within one eighth of the
   upper concurrency; where the knee has several workers at the deepest queue, the same bisection finds the
   least queue depth on that many workers.
4. **Flat.** Every point from the knee on that the unpaired rule cannot tell from the plateau gives the range
   the answer states: "flat from 32 in flight: any concurrency from there gives 2.2-2.4 GiB/s". A curve whose
   knee is its first point is flat from the start.

At most ``max_points`` distinct points are measured per search.
"""

from __future__ import annotations

import collections
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from xferscope.compare.verdict import MARGIN, SLOWER, Verdict, paired_verdict, repeated_verdict

GAIN = 1.05  # a step that gains less (or cannot be told apart from its neighbour) is flat
PATIENCE = 2  # a ladder stops after this many steps in a row that do not gain
MIN_ROUNDS = 3
MAX_ROUNDS = 5
MAX_POINTS = 24
#: the most rounds of a candidate against the best point (compare's --rounds auto goes up to as many)
KNEE_ROUNDS = 9
#: the stages of the search, as points and comparisons name them
DOUBLING, LIMIT = "doubling", "limit"
#: the stages whose comparisons set a candidate against the best point (baseline: that point); files of
#: earlier versions name their neighbour comparisons "bisection" and "queue depth at the knee"
PLATEAU, BISECTION, QUEUE = "knee", "knee bisection", "knee queue depth"
AGAINST_PLATEAU = (PLATEAU, BISECTION, QUEUE)

#: one line for every output that shows a knee: how it was found
SEARCH_RULE = (
    "knee: the smallest concurrency the verdict rule, in paired rounds against the best point, does not call "
    "slower; plateau: the median of the points the rule cannot tell from the best; climbed by doubling "
    "(workers at qd 1, one worker's queue, then workers at the deepest queue) until two steps in a row gain "
    f"under {100 * GAIN - 100:.0f}%, the limit checked, then bisected"
)


class Measured(Protocol):
    throughput: float


@dataclass(frozen=True, order=True)
class InFlight:
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


def sort_key(shape: InFlight) -> tuple[int, int]:
    """Smaller concurrency first; on a tie, fewer workers (the cheaper way to keep as much in flight)."""
    return shape.concurrency, shape.workers


@dataclass
class Point:
    """Every measurement of one shape, in the order taken, and the stage of the search that asked for it."""

    shape: InFlight
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
class ShapeComparison:
    """Interleaved rounds of two neighbours; ``baseline`` is the one with less in flight."""

    baseline: InFlight
    other: InFlight
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


@dataclass(frozen=True)
class FoundPlateau:
    """Where the curve stops rising: its figure (the median of the points' medians that the rule cannot tell
    from the best), the point nearest that figure, and the points on it."""

    value: float
    shape: InFlight
    shapes: tuple[InFlight, ...]
    best: InFlight  # the best median: the reference for paired rounds, which measure it afresh (no luck carried)


@dataclass(frozen=True)
class Flat:
    """From the knee on: the points on the plateau, and the range of their medians."""

    start: InFlight  # the knee
    until: InFlight  # the most concurrency measured on the plateau
    low: float
    high: float
    from_first: bool  # the knee is the least concurrency measured: no concurrency gains

    def text(self, unit: str = "", digits: int = 2) -> str:
        """'flat from 32 in flight: any concurrency from there to 1024 gives 2.20-2.40 GiB/s'."""
        span = f" to {self.until.concurrency}" if self.until.concurrency > self.start.concurrency else ""
        gives = f"{self.low:.{digits}f}-{self.high:.{digits}f}" + (f" {unit}" if unit else "")
        if self.from_first:
            return f"flat: no concurrency gains; any from {self.start.concurrency} in flight{span} gives {gives}"
        return f"flat from {self.start.concurrency} in flight: any concurrency from there{span} gives {gives}"


@dataclass
class SearchResult:
    points: list[Point]
    comparisons: list[ShapeComparison]
    knee: InFlight | None
    plateau: InFlight | None
    #: the axes whose doubling still gained at their limit: the plateau may lie beyond (raise the limit)
    unsaturated: list[str] = field(default_factory=list)
    #: why the search ended early ("interrupted", "point budget of 24 reached", "failed: ..."); None: it finished
    stopped: str | None = None
    #: the plateau's figure (the median of its points' medians; None: nothing measured)
    plateau_value: float | None = None
    #: from the knee on, the points on the plateau and their range
    flat: Flat | None = None

    @property
    def measurements(self) -> int:
        return sum(len(p.measurements) for p in self.points)

    def point(self, shape: InFlight | None) -> Point | None:
        return next((p for p in self.points if p.shape == shape), None)


def _not_slower(verdict: Verdict) -> bool:
    return verdict.word != SLOWER


def plateau_of(points: list[Point], margin: float = MARGIN) -> FoundPlateau | None:
    """The plateau of the points measured. The best median is one point's luck, so its figure is the median of
    the medians of the points that the unpaired rule (``repeated_verdict``) cannot tell from the best, and its
    point the one of those nearest that figure; the points the rule cannot tell from that point are on it."""
    measured = [p for p in points if p.measurements and math.isfinite(p.median)]
    if not measured:
        return None
    best = max(measured, key=lambda p: (p.median, [-x for x in sort_key(p.shape)]))
    near = [p for p in measured if p is best or _not_slower(repeated_verdict(best.values, p.values, margin))]
    value = statistics.median(p.median for p in near)
    centre = min(near, key=lambda p: (abs(p.median - value), sort_key(p.shape)))
    on = [p for p in measured if p in near or _not_slower(repeated_verdict(centre.values, p.values, margin))]
    return FoundPlateau(value, centre.shape, tuple(sorted((p.shape for p in on), key=sort_key)), best.shape)


def knee_of(
    points: list[Point], comparisons: Sequence[ShapeComparison] = (), margin: float = MARGIN
) -> tuple[InFlight | None, InFlight | None]:
    """(knee, plateau's point). Where candidates were set against the best point in paired rounds (the
    search does so), the knee is the least concurrency among that point and the candidates the rule did not call
    slower; without such rounds (a search stopped before them), the least concurrency on the plateau
    (``plateau_of``)."""
    judged = [c for c in comparisons if c.stage in AGAINST_PLATEAU]
    if judged:
        ref = collections.Counter(c.baseline for c in judged).most_common(1)[0][0]
        called_slower = {c.other for c in judged if not _not_slower(c.verdict)}
        held = {c.other for c in judged if _not_slower(c.verdict)}
        return min((held | {ref}) - called_slower or {ref}, key=sort_key), ref
    plateau = plateau_of(points, margin)
    if plateau is None:
        return None, None
    return plateau.shapes[0], plateau.shape


def flat_of(points: list[Point], knee: InFlight | None, plateau: FoundPlateau | None) -> Flat | None:
    """From the knee on: the points on the plateau, and the range of their medians (None for fewer than two)."""
    if plateau is None or knee is None:
        return None
    by_shape = {p.shape: p for p in points if p.measurements}
    on = [by_shape[s] for s in plateau.shapes if sort_key(s) >= sort_key(knee) and s in by_shape]
    if knee in by_shape and by_shape[knee] not in on:
        on.insert(0, by_shape[knee])
    if len(on) < 2:  # one point says nothing of how flat the curve is
        return None
    medians = [p.median for p in on]
    until = max((p.shape for p in on), key=sort_key)
    first = min(by_shape, key=sort_key)
    return Flat(knee, until, min(medians), max(medians), from_first=knee == first)


def judged(
    points: list[Point],
    comparisons: list[ShapeComparison],
    unsaturated: list[str],
    stopped: str | None,
    margin: float = MARGIN,
) -> SearchResult:
    """A search's answer from what it measured (``points``, ``comparisons``), by the rules above: a search as it
    ends, or one read back from its file."""
    knee, plateau = knee_of(points, comparisons, margin)
    level = plateau_of(points, margin)
    return SearchResult(
        points,
        comparisons,
        knee,
        plateau,
        unsaturated,
        stopped,
        plateau_value=level.value if level else None,
        flat=flat_of(points, knee, level),
    )


def ladder(max_workers: int, max_qd: int) -> list[InFlight]:
    """One worker's queue filled first (a queue keeps more in flight for less CPU), then more workers at the
    deepest queue: (1, 1) .. (1, max_qd), (2, max_qd) .. (max_workers, max_qd). Without a queue, the workers
    1 .. max_workers."""
    return [InFlight(1, q) for q in range(1, max_qd + 1)] + [InFlight(w, max_qd) for w in range(2, max_workers + 1)]


def workers_ladder(max_workers: int) -> list[InFlight]:
    """The workers at queue depth 1: (1, 1) .. (max_workers, 1)."""
    return [InFlight(w, 1) for w in range(1, max_workers + 1)]


def ladders(max_workers: int, max_qd: int) -> list[tuple[list[InFlight], list[str]]]:
    """The ladders the search climbs, each with the axis its last step grows: for a path with a queue, its queue then
    workers at the deepest queue, and workers at queue depth 1; without one, the workers."""
    if max_qd == 1:
        return [(workers_ladder(max_workers), ["workers"])]
    out = [(ladder(max_workers, max_qd), ["workers"] if max_workers > 1 else ["iodepth"])]
    if max_workers > 1:
        out.append((workers_ladder(max_workers), ["workers"]))
    return out


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
    ``ShapeComparison`` after every finished comparison (from the thread that runs the search; it must not block).
    ``margin``: the verdict rule's m."""

    def __init__(
        self,
        measure: Callable[[InFlight], Measured],
        *,
        max_workers: int,
        max_qd: int = 1,
        min_rounds: int = MIN_ROUNDS,
        max_rounds: int = MAX_ROUNDS,
        max_points: int = MAX_POINTS,
        margin: float = MARGIN,
        knee_rounds: int | None = None,
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
        self.margin = margin
        #: the most rounds of a candidate against the best point: KNEE_ROUNDS, or fewer where max_rounds is more
        self.knee_rounds = knee_rounds if knee_rounds is not None else max(max_rounds, KNEE_ROUNDS)
        self.listener = listener or (lambda event: None)
        self.points: dict[InFlight, Point] = {}
        self.comparisons: list[ShapeComparison] = []
        self.unsaturated: list[str] = []
        self._ladders = ladders(max_workers, max_qd)

    # ------------------------------------------------------------ the walk
    def run(self) -> SearchResult:
        stopped = None
        try:
            for shapes, axes in self._ladders:
                top = self._climb(shapes)
                if top == len(shapes) - 1 and len(shapes) > 1:  # still gaining at the limit: the plateau may lie beyond
                    self.unsaturated += [axis for axis in axes if axis not in self.unsaturated]
            self._knee()
        except StopSearch as exc:
            stopped = exc.reason
        except BudgetReached:
            stopped = f"point budget of {self.max_points} reached"
        return self.result(stopped)

    def result(self, stopped: str | None = None) -> SearchResult:
        points = sorted(self.points.values(), key=lambda p: sort_key(p.shape))
        found = judged(points, list(self.comparisons), [], stopped, self.margin)
        limits = {"workers": self.max_workers, "iodepth": self.max_qd}
        # an axis still gaining at its limit matters where the answer sits at that limit
        plateau = found.plateau
        found.unsaturated = [
            axis for axis in self.unsaturated if plateau is not None and getattr(plateau, axis) == limits[axis]
        ]
        return found

    def _climb(self, shapes: list[InFlight]) -> int:
        """Along ``shapes`` (ascending concurrency): double the concurrency until ``PATIENCE`` steps in a row do
        not gain, then check the last shape against the last that gained (a curve that rises slowly, or again at
        high concurrency, gains there). Returns the index of the last shape that gained (0: none did)."""
        c = [s.concurrency for s in shapes]
        last = len(shapes) - 1
        gained = at = misses = 0
        while at < last:
            step = next((j for j in range(at + 1, last + 1) if c[j] >= 2 * c[at]), last)
            if self._compare(shapes[at], shapes[step], DOUBLING).gain:
                gained, misses = step, 0
            else:
                misses += 1
            at = step
            if misses >= PATIENCE:
                break
        if at != last and self._compare(shapes[gained], shapes[last], LIMIT).gain:
            gained = last
        return gained

    def _knee(self) -> None:
        """The least concurrency the paired rule does not call slower than the best point: the points on
        the plateau tried from the least concurrency up, then bisection below the first that holds, then the
        least queue depth on its workers."""
        plateau = plateau_of(list(self.points.values()), self.margin)
        if plateau is None:
            return
        # the best point as the reference: its luck stays in its old figures, as the rounds measure it afresh;
        # on a rising curve it lies on the plateau, where a point near the median may lie below it
        ref = plateau.best
        knee = ref
        for shape in plateau.shapes:
            if sort_key(shape) >= sort_key(ref):
                break
            if self._holds(ref, shape, PLATEAU):
                knee = shape
                break
        knee = self._bisect_below(ref, knee)
        if self.max_qd > 1 and knee.workers > 1 and knee.iodepth > 1:
            self._queue_at(ref, knee)

    def _holds(self, ref: InFlight, shape: InFlight, stage: str) -> bool:
        """``shape`` is on the plateau: the paired rule does not call it slower than ``ref`` (in up to
        ``knee_rounds``, as many as compare's --rounds auto by default: the knee is the answer)."""
        if shape == ref:
            return True
        return _not_slower(self._compare(ref, shape, stage, self.knee_rounds).verdict)

    def _bisect_below(self, ref: InFlight, knee: InFlight) -> InFlight:
        """Between the knee and the most concurrency below it on its ladder that is off the plateau: halve the
        gap while it is wider than the resolution; the least shape that holds."""
        for shapes, _ in self._ladders:
            if knee not in shapes:
                continue
            hi = shapes.index(knee)
            off = self._off_plateau(ref)
            lows = [j for j in range(hi) if shapes[j] in off]
            if not lows:
                continue
            return self._bisect(shapes, max(lows), hi, ref, BISECTION)
        return knee

    def _off_plateau(self, ref: InFlight) -> set[InFlight]:
        """The shapes measured that are off the plateau: called slower than ``ref`` in paired rounds, or not on
        the plateau of the points so far and never set against it."""
        plateau = plateau_of(list(self.points.values()), self.margin)
        judged = {c.other: _not_slower(c.verdict) for c in self.comparisons if c.stage in AGAINST_PLATEAU}
        on = set(plateau.shapes) if plateau else set()
        return {s for s in self.points if (s in judged and not judged[s]) or (s not in judged and s not in on)}

    def _queue_at(self, ref: InFlight, knee: InFlight) -> None:
        """With several workers the knee lies at the deepest queue; the least depth on that many workers that
        holds, by the same bisection (the answer follows from the comparisons, ``knee_of``)."""
        shapes = [InFlight(knee.workers, q) for q in range(1, knee.iodepth + 1)]
        if not self._holds(ref, shapes[0], QUEUE):
            self._bisect(shapes, 0, len(shapes) - 1, ref, QUEUE)

    def _bisect(self, shapes: list[InFlight], lo: int, hi: int, ref: InFlight, stage: str) -> InFlight:
        """Between ``shapes[lo]`` (off the plateau) and ``shapes[hi]`` (on it): halve the concurrency's gap while
        it is wider than the resolution; the first shape on the plateau."""
        c = [s.concurrency for s in shapes]
        while hi - lo > 1 and c[hi] - c[lo] > resolution(c[hi]):
            target = midpoint(c[lo], c[hi])
            mid = min(range(lo + 1, hi), key=lambda j: (abs(c[j] - target), j))
            if self._holds(ref, shapes[mid], stage):
                hi = mid
            else:
                lo = mid
        return shapes[hi]

    # ------------------------------------------------------- measurements
    def _compare(self, baseline: InFlight, other: InFlight, stage: str, most: int | None = None) -> ShapeComparison:
        """Interleaved, rotated rounds of the two shapes until the rule settles (faster, slower or the same), or
        the cap (``most``, else ``max_rounds``)."""
        for shape in (baseline, other):
            if shape not in self.points:
                if len(self.points) >= self.max_points:
                    raise BudgetReached
                self.points[shape] = Point(shape, stage)
        base_values: list[float] = []
        other_values: list[float] = []
        verdict = None
        for round_no in range(most or self.max_rounds):
            order = [(baseline, base_values), (other, other_values)]
            if round_no % 2:
                order.reverse()
            for shape, values in order:
                values.append(float(self._measure(shape).throughput))
            if round_no + 1 >= self.min_rounds:
                verdict = paired_verdict(base_values, other_values, self.margin)
                if verdict.settled:
                    break
        comparison = ShapeComparison(baseline, other, verdict, stage)
        self.comparisons.append(comparison)
        self.listener(comparison)
        return comparison

    def _measure(self, shape: InFlight):
        measured = self.measure(shape)
        if not measured.throughput > 0:  # the rule compares positive figures only: a run that moved nothing
            raise StopSearch(f"failed: {shape.label} moved no data")
        point = self.points[shape]
        point.measurements.append(measured)
        self.listener(point)
        return measured
