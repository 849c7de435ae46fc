"""A comparison's plan and progress on stderr: the planned time before it starts, and on a terminal a bar
with the round, the path and the time left (nothing when stderr is piped)."""

from __future__ import annotations

import shutil
import time

from xferscope.compare.rounds import RoundsComparison
from xferscope.output.terminal import ProgressLine
from xferscope.units import format_bytes, format_rate

BAR_WIDTH = 20


def clock(seconds: float) -> str:
    """'0:07', '12:30', '1:02:03'."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def plan_text(comp: RoundsComparison, dataset_bytes: int, to_fill: int) -> str:
    """'planned: 2 paths x 3 rounds x 2 s = 0:12 of runs, plus preparing the 64 MiB dataset once ...'."""
    duration = comp.specs[0].duration
    paths = f"{comp.paths} path{'s' if comp.paths != 1 else ''}"
    rounds = f"{comp.rounds} round{'s' if comp.rounds != 1 else ''}"
    if comp.max_rounds is not None and comp.max_rounds > comp.rounds:
        rounds = f"{comp.rounds} to {comp.max_rounds} rounds (more while a verdict is undecided)"
    prep = (
        f"plus preparing the {format_bytes(dataset_bytes)} dataset once and setting up each run"
        if to_fill
        else f"plus setting up each run (the {format_bytes(dataset_bytes)} dataset is there already)"
    )
    if duration is None:
        return f"planned: {paths} x {rounds}, each run until it has moved its --total; {prep}"
    total = clock(len(comp.runs) * duration)
    if comp.max_rounds is not None and comp.max_rounds > comp.rounds:
        total += f" to {clock(comp.paths * comp.max_rounds * duration)}"
    return f"planned: {paths} x {rounds} x {duration:g} s = {total} of runs, {prep}"


class RoundsProgress(ProgressLine):
    """The live line of a comparison: round, path, a bar over the whole plan, the time left and the current
    figures. The time left counts what each run took beyond its duration so far (set-up, clean-up)."""

    def __init__(self, enabled: bool, comp: RoundsComparison):
        super().__init__(enabled, comp.specs[0].duration)
        self.comp = comp
        self.index = 0
        self.started_at = time.monotonic()
        self.run_started = self.started_at
        self.overheads: list[float] = []
        self._t = 0.0

    def begin(self, index: int) -> None:
        self.index = index
        self.run_started = time.monotonic()
        self._t = self._last = 0.0
        self._draw(None)

    def end(self) -> None:
        if self.duration:
            self.overheads.append(max(0.0, time.monotonic() - self.run_started - self.duration))

    def fill(self, done: int, total: int) -> None:
        if self.enabled:
            self._write(f"\r\033[Kpreparing the dataset: {100 * done // max(total, 1)}% of {format_bytes(total)}")

    def sample(self, s) -> None:
        if not self.enabled or s is None or s.t - self._last < 0.25:
            return
        self._last = s.t
        self._t = s.t
        self._draw(s)

    def remaining(self) -> float | None:
        """Seconds left in the plan, or None when runs end by size rather than time."""
        if not self.duration:
            return None
        per_run = self.duration + (sum(self.overheads) / len(self.overheads) if self.overheads else 0.0)
        left_in_run = max(0.0, self.duration - self._t)
        return left_in_run + per_run * (len(self.comp.runs) - self.index - 1)

    def line(self, s=None) -> str:
        run = self.comp.runs[self.index]
        total = len(self.comp.runs)
        done_runs = self.index + (min(self._t / self.duration, 1.0) if self.duration else 0.0)
        frac = done_runs / total
        filled = round(frac * BAR_WIDTH)
        left = self.remaining()
        text = (
            f"round {run.round + 1}/{self.comp.rounds} {self.comp.labels[run.slot]} "
            f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {100 * frac:3.0f}%"
            + (f" ETA {clock(left)}" if left is not None else "")
        )
        if s is not None:
            text += f"  {format_rate(s.throughput_gib_s * (1 << 30))}  {s.iops:,.0f} IOPS"
        return text

    def _draw(self, s) -> None:
        if self.enabled:
            width = shutil.get_terminal_size((100, 24)).columns - 1
            self._write("\r\033[K" + self.line(s)[:width])
