"""A sweep on the terminal: its plan (``--dry-run``), and its progress on stderr: a live line on a terminal, one
line per finished or skipped point everywhere."""

from __future__ import annotations

import sys
import time

import typer

from xferscope.output.terminal import ProgressLine
from xferscope.sweep.execute import PointFinished, PointSkipped, RepetitionFinished, RepetitionStarted, SampleTaken
from xferscope.sweep.stats import io_stats, mem_rows
from xferscope.units import figure_text


class SweepProgress(ProgressLine):
    """A listener for ``Sweep``: call it with each event. The live line shows only on a terminal."""

    def __init__(self, total: int):
        super().__init__(sys.stderr.isatty(), None)
        self.total = total
        self.width = len(str(total))
        self.prefix = ""
        self.reasons: dict[str, int] = {}
        self.earlier = 0
        self._last_live = 0.0

    def __call__(self, event) -> None:
        if isinstance(event, RepetitionStarted):
            self.prefix = f"[{event.point.index:>{self.width}}/{self.total}] {event.point.label}" + (
                f" rep {event.repetition}/{event.repetitions}" if event.repetitions > 1 else ""
            )
            self._live(self.prefix)
        elif isinstance(event, SampleTaken):
            now = time.monotonic()
            if self.enabled and now - self._last_live >= 0.25:
                self._last_live = now
                self._live(f"{self.prefix}  {self._sample_text(event.sample)}")
        elif isinstance(event, RepetitionFinished) and event.status != "ok":
            self._line(
                f"{self._head(event.point)}: repetition {event.status}"
                + (f": {event.record.reason}" if event.record.reason else "")
            )
        elif isinstance(event, PointFinished):
            self._line(f"{self._head(event.point)}: {self._point_text(event.record)}")
        elif isinstance(event, PointSkipped):
            if event.already_done:
                self.earlier += 1
                return
            first = event.reason not in self.reasons
            self.reasons[event.reason] = self.reasons.get(event.reason, 0) + 1
            if first:
                self._line(f"{self._head(event.point)}: skipped: {event.reason}")

    # ------------------------------------------------------------- text
    def _head(self, point) -> str:
        return f"[{point.index:>{self.width}}/{self.total}] {point.label}"

    @staticmethod
    def _sample_text(sample) -> str:
        if hasattr(sample, "throughput_mb_s"):
            from xferscope.report import progress_text

            return progress_text(sample, None)
        delay = "idle" if sample.delay is None else f"delay {sample.delay}"
        return f"{delay}: latency {figure_text(sample.latency_ns, '{:,.1f}')} ns, bandwidth {figure_text(sample.bandwidth_mb_s, '{:,.1f}')} MB/s"

    @staticmethod
    def _point_text(record) -> str:

        n = record.ok_count()
        if "path" in record.identity:
            st = io_stats(record.repetitions)["throughput_mib_s"]
            spread = f" (stdev {figure_text(st['stdev'], '{:,.1f}')}, {n} reps)" if n > 1 else ""
            return f"{figure_text(st['median'], '{:,.1f}')} MiB/s{spread}"
        rows = mem_rows(record.repetitions)
        idle = [r for r in rows if r["delay"] is None]
        where = f" ({idle[0]['locality']})" if idle and idle[0].get("locality") else ""
        return (
            f"{len(rows) - len(idle)} delays"
            + (f", idle latency {figure_text(idle[0]['latency_ns']['median'], '{:,.1f}')} ns{where}" if idle else "")
            + (f" ({n} reps)" if n > 1 else "")
        )

    # ------------------------------------------------------------ output
    def _live(self, text: str) -> None:
        if self.enabled:
            self._write("\r\033[K" + text)

    def _line(self, text: str) -> None:
        """A line that stays, on a terminal or not."""
        self.clear()
        self._write(text + "\n")
        self._shown = False


def print_plan(sweep, results_path: str) -> None:
    """--dry-run: the points, what the results file already holds, and the time the rest will take."""
    profile = sweep.profile
    todo = 0
    for point in sweep.points:
        record = sweep.results.record(point)
        if point.skip:
            state = f"skip: {point.skip}"
        elif record.ok_count() >= profile.repetitions:
            state = "done"
        else:
            todo += profile.repetitions - record.ok_count()
            state = f"{record.ok_count()}/{profile.repetitions} done" if record.ok_count() else "to run"
        typer.echo(f"{point.index:>4}  {point.label:<44} {state}")
    seconds = profile.point_duration() or 0.0
    if profile.kind == "mem":
        seconds *= len(sweep.points[0].spec.delays) + 1 if sweep.points else 0
    total = todo * seconds
    took = f"{total:.1f} s" if total < 120 else f"{total / 60:.0f} min" if total < 7200 else f"{total / 3600:.1f} h"
    typer.echo(
        f"{len(sweep.points)} points x {profile.repetitions} repetitions; {todo} repetitions to run, "
        f"about {took} of measuring; results: {results_path}"
    )
