"""``--find-max``: the largest number of accelerators one storage keeps at or above the AU threshold.

The count doubles from 1 until a count fails, then the gap between the last pass and the first failure is
bisected. A count whose AU lies within ``margin`` of the threshold is measured again (up to ``repeats``
runs in all) and judged by the mean of its runs, as MLPerf Storage judges a result by the mean of its runs.
A full scan would measure every count from 1 to ``upper``; this measures about 2 log2 of the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

#: an AU this close to the threshold (in AU, 0-1) is measured again
NEAR = 0.03
REPEATS = 3


@dataclass
class AcceleratorsTried:
    accelerators: int
    aus: list[float] = field(default_factory=list)
    results: list = field(default_factory=list)

    @property
    def au(self) -> float:
        known = [a for a in self.aus if not math.isnan(a)]
        return sum(known) / len(known) if known else math.nan


@dataclass
class Search:
    threshold: float
    upper: int
    points: dict[int, AcceleratorsTried] = field(default_factory=dict)
    best: int = 0
    stopped: bool = False  # interrupted: ``best`` is the most that passed before it stopped

    @property
    def runs(self) -> int:
        return sum(len(p.aus) for p in self.points.values())

    def passed(self, n: int) -> bool:
        return self.points[n].au >= self.threshold


def find_max(
    measure: Callable[[int], tuple[float, object]],
    threshold: float,
    upper: int,
    *,
    near: float = NEAR,
    repeats: int = REPEATS,
    on_point: Callable[[Search, int], None] | None = None,
) -> Search:
    """``measure(n)`` -> (AU of a run with n accelerators, its result). Returns the search with ``best``."""
    search = Search(threshold, max(1, upper))

    def judge(n: int) -> bool:
        point = search.points.setdefault(n, AcceleratorsTried(n))
        while True:
            au, result = measure(n)
            point.aus.append(au)
            point.results.append(result)
            if len(point.aus) >= repeats or math.isnan(point.au) or abs(point.au - threshold) >= near:
                break
        if on_point is not None:
            on_point(search, n)
        return point.au >= threshold

    lo, hi = 0, None  # lo passes (0: none yet), hi fails
    try:
        n = 1
        while n <= search.upper:
            if judge(n):
                lo = n
                if n == search.upper:
                    break
                n = min(n * 2, search.upper)
            else:
                hi = n
                break
        if hi is not None:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if judge(mid):
                    lo = mid
                else:
                    hi = mid
    except KeyboardInterrupt:  # Ctrl-C: the counts judged so far stand; the answer is a lower bound
        search.stopped = True
    search.best = lo
    return search
