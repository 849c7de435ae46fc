"""A saturation on the terminal: its plan (``--dry-run``), the live line while it searches, the searches with
their knees and verdicts, its files (``--json``, ``--csv``) and its exit code; and the one sequence that runs a
plan and reports it, with the runner of one host (``saturate.execute.LocalRunner``) or of an MPI job
(``cluster.saturate.ClusterRunner``)."""

from __future__ import annotations

import sys

import typer

from xferscope.output.files import Output, end_of_run, show_then_write
from xferscope.output.terminal import ProgressLine
from xferscope.report import say


class SaturateProgress(ProgressLine):
    """One line on a terminal: which search, which point, how far, and the time left at most (from each path's
    runs so far, ``saturate.eta``); on any stderr, a line when a path's first run has shown what a run costs."""

    def __init__(self, enabled: bool, plan=None):
        super().__init__(enabled, None)
        from xferscope.saturate.eta import SaturationClock

        self.series = None
        self.index = self.total = 0
        self.points = self.runs = 0
        self.clock = SaturationClock.of(plan) if plan is not None else None

    def __call__(self, event) -> None:
        from xferscope.saturate.execute import MeasurementStarted, PointMeasured, SeriesStarted
        from xferscope.saturate.plan import seconds_text

        clock = self.clock
        if isinstance(event, SeriesStarted):
            self.series, self.index, self.total = event.series, event.index, event.total
            self.points = self.runs = 0
            if clock is not None:
                clock.series_started(event.index)
        elif isinstance(event, PointMeasured):
            self.runs += 1
            if clock is not None and clock.run_ended():
                path = event.series.path
                self.clear()
                typer.echo(
                    f"xferscope: {path}: {clock.run_seconds(path):.1f} s a run with its set-up and teardown "
                    f"({clock.duration:g} s measuring; its first, which started the engine, "
                    f"{clock.first_run_seconds(path):.1f} s); at most {seconds_text(clock.left())} left",
                    err=True,
                )
        elif isinstance(event, MeasurementStarted):
            if clock is not None:
                clock.run_started()
            if self.enabled:
                from xferscope.saturate.report import progress_text

                left = f"; at most {seconds_text(clock.left())} left" if clock is not None and clock.walls else ""
                self._write(
                    "\r\033[K"
                    + progress_text(
                        event.series.label, self.index, self.total, event.shape.label, self.points, self.runs
                    )
                    + left
                )


def print_dry_run(plan) -> None:
    from xferscope.saturate.plan import seconds_text

    series = plan.series()
    for i, s in enumerate(series, start=1):
        role = " (storage reference)" if s.role != "measured" else ""
        typer.echo(
            f"{i:>4}  {s.label}{role}: up to {plan.points_budget(s.path)} of {plan.grid_points(s.path)} grid points, "
            f"up to {plan.limit_text(s.path)}"
        )
    typer.echo(
        f"{len(series)} searches; each point {plan.base.duration:g} s a run, {plan.min_rounds}-"
        f"{plan.max_rounds} interleaved rounds per comparison; at most {seconds_text(plan.worst_case_seconds())}"
        " of measuring"
    )


def announce(plan) -> None:
    from xferscope.saturate.plan import seconds_text

    series = plan.series()
    grid = sum(plan.grid_points(s.path) for s in series)
    typer.echo(
        f"xferscope: {len(series)} searches against {grid} points of the full grids; at most "
        f"{seconds_text(plan.worst_case_seconds())} of measuring ({plan.base.duration:g} s a run), usually far "
        "less, plus each run's set-up and teardown (the time left follows from the first runs)",
        err=True,
    )


def run_and_report(plan, runner, *, fmt: str, json_path: str | None, csv_path: str | None) -> None:
    """Check that every path can run here, run the plan's searches with ``runner``, print the saturation,
    write its files, and end with its exit code (``typer.Exit``)."""
    from xferscope.saturate.execute import SaturationRun, check_paths
    from xferscope.saturate.record import storage_of

    check_paths(plan)
    storage, source = storage_of(plan)
    announce(plan)
    progress = SaturateProgress(sys.stderr.isatty() and fmt != "json", plan)
    saturation = SaturationRun(plan, runner, listener=progress, storage=storage, storage_source=source)
    try:
        from xferscope.run.engine_pool import kept_engines

        with kept_engines():  # the runs of each path share one engine process
            outcome = saturation.run()
    finally:
        progress.clear()
    finish(outcome, report(outcome, fmt=fmt, json_path=json_path, csv_path=csv_path))


def report(outcome, *, fmt: str, json_path: str | None, csv_path: str | None) -> int:
    """Print the saturation, then write the files asked for (``output.files``: ``-`` is stdout, a closed
    terminal loses no file); ExitCode.NOT_WRITTEN when one could not be written (a line said which), else 0."""
    from xferscope.records import as_data, json_text
    from xferscope.saturate.record import csv_text, saturation_to_record
    from xferscope.saturate.report import print_saturation

    def shown() -> dict:
        """On stdout the saturation without its runs (the file keeps them): built without them, not dropped."""
        import msgspec

        data = as_data(msgspec.structs.replace(saturation_to_record(outcome), results=[]))
        del data["results"]
        return data

    return show_then_write(
        fmt,
        shown,
        lambda: print_saturation(outcome, say),
        [
            Output("JSON", "--json", json_path, lambda: json_text(saturation_to_record(outcome))),
            Output("CSV", "--csv", csv_path, lambda: csv_text(outcome)),
        ],
    )


def finish(outcome, written: int = 0) -> None:
    """The exit code: interrupted 130, a failed run 1, nothing measured 1, then ``written`` (4: a file asked
    for was not written)."""
    status = "interrupted" if outcome.stopped == "interrupted" else "failed" if outcome.failed else "ok"
    end_of_run(status, written, outcome.stopped)
