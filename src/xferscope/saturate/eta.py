"""A saturation's time left, from the runs so far: each path's wall time per run (its measuring and its set-up
and teardown, as measured), times the runs each search may still take (its point budget, every comparison at
the round cap). An upper bound that holds: the worst case counted in measuring time alone left out the set-up,
which on a GPU costs about as much again."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence


class SaturationClock:
    def __init__(
        self,
        paths: Sequence[str],
        worst_runs: Sequence[int],
        duration: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        """``paths`` and ``worst_runs``: each search's path and the most runs it may take, in order."""
        self.paths, self.worst = list(paths), list(worst_runs)
        self.duration = duration
        self.clock = clock
        self.walls: dict[str, list[float]] = {}
        self.index = 0  # the search under way (0-based)
        self.runs = 0  # its runs so far
        self._t0: float | None = None

    @classmethod
    def of(cls, plan) -> SaturationClock:
        series = plan.series()
        return cls([s.path for s in series], [plan.worst_case_runs(s.path) for s in series], plan.base.duration or 0.0)

    def series_started(self, index: int) -> None:
        """``index``: 1-based, as the saturation's events count."""
        self.index, self.runs = index - 1, 0

    def run_started(self) -> None:
        self._t0 = self.clock()

    def run_ended(self) -> bool:
        """A run of the search under way ended; True when it was its path's first (its cost is known now)."""
        self.runs += 1
        if self._t0 is None:
            return False
        wall = self.clock() - self._t0
        self._t0 = None
        path = self.paths[self.index]
        self.walls.setdefault(path, []).append(wall)
        return len(self.walls[path]) == 1

    def run_seconds(self, path: str) -> float:
        """A run's wall time: the path's median so far, else that of every run so far, else the duration."""
        if self.walls.get(path):
            return statistics.median(self.walls[path])
        every = [w for walls in self.walls.values() for w in walls]
        return statistics.median(every) if every else self.duration

    def left(self) -> float:
        """Seconds left at most: this search's remaining runs and every later search's, each at its path's
        wall time per run."""
        if not self.paths:
            return 0.0
        now = max(0, self.worst[self.index] - self.runs) * self.run_seconds(self.paths[self.index])
        later = sum(w * self.run_seconds(p) for p, w in zip(self.paths[self.index + 1 :], self.worst[self.index + 1 :]))
        return now + later
