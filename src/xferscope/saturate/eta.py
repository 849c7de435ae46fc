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
        """A run of the search under way ended; True when it was its path's second (the first starts the
        engine's process, which later runs share: from the second on, a run's cost is known)."""
        self.runs += 1
        if self._t0 is None:
            return False
        wall = self.clock() - self._t0
        self._t0 = None
        path = self.paths[self.index]
        self.walls.setdefault(path, []).append(wall)
        return len(self.walls[path]) == 2

    def run_seconds(self, path: str) -> float:
        """A run's wall time after the first: the path's median of those so far, else that of every path's,
        else its one run so far, else the duration."""
        later = self.walls.get(path, [])[1:] or [w for walls in self.walls.values() for w in walls[1:]]
        if later:
            return statistics.median(later)
        return self.walls[path][0] if self.walls.get(path) else self.duration

    def first_run_seconds(self, path: str) -> float:
        """A path's first run (its engine process started): its own, else the median of the other paths'."""
        firsts = [walls[0] for walls in self.walls.values() if walls]
        if self.walls.get(path):
            return self.walls[path][0]
        return statistics.median(firsts) if firsts else self.duration

    def left(self) -> float:
        """Seconds left at most: this search's remaining runs and every later search's, at its path's cost a
        run (a later path's first run at a first run's cost)."""
        if not self.paths:
            return 0.0
        path = self.paths[self.index]
        left = max(0, self.worst[self.index] - self.runs)
        now = (self.first_run_seconds(path) if self.runs == 0 else 0.0) + max(0, left - (self.runs == 0)) * (
            self.run_seconds(path)
        )
        later = 0.0
        for p, w in zip(self.paths[self.index + 1 :], self.worst[self.index + 1 :]):
            started = bool(self.walls.get(p))
            later += (0.0 if started else self.first_run_seconds(p)) + (w - (not started)) * self.run_seconds(p)
        return now + later
