"""A saturation on the terminal: its plan (``--dry-run``), the live line while it searches, the searches with
their knees and verdicts, its files (``--json``, ``--csv``) and its exit code; and the one sequence that runs a
plan and reports it, with the runner of one host (``saturate.execute.LocalRunner``) or of an MPI job
(``cluster.saturate.ClusterRunner``)."""

from __future__ import annotations

import json
import sys

import typer

from xferscope.errors import ExitCode
from xferscope.output.files import Output, human_output, write_outputs
from xferscope.output.terminal import ProgressLine


class SaturateProgress(ProgressLine):
    """One line on a terminal: which search, which point, how far."""

    def __init__(self, enabled: bool):
        super().__init__(enabled, None)
        self.series = None
        self.index = self.total = 0
        self.points = self.runs = 0

    def __call__(self, event) -> None:
        from xferscope.saturate.execute import MeasurementStarted, PointMeasured, SeriesStarted

        if isinstance(event, SeriesStarted):
            self.series, self.index, self.total = event.series, event.index, event.total
            self.points = self.runs = 0
        elif isinstance(event, PointMeasured):
            self.runs += 1
        elif isinstance(event, MeasurementStarted) and self.enabled:
            from xferscope.saturate.report import progress_text

            self.points = max(self.points, 0)
            self._write(
                "\r\033[K"
                + progress_text(event.series.label, self.index, self.total, event.shape.label, self.points, self.runs)
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
        f"{seconds_text(plan.worst_case_seconds())} of measuring ({plan.base.duration:g} s a run), "
        "usually far less",
        err=True,
    )


def run_and_report(plan, runner, *, fmt: str, json_path: str | None, csv_path: str | None) -> None:
    """Check that every path can run here, run the plan's searches with ``runner``, print the saturation,
    write its files, and end with its exit code (``typer.Exit``)."""
    from xferscope.saturate.execute import Saturation, check_paths
    from xferscope.saturate.record import storage_of

    check_paths(plan)
    storage, source = storage_of(plan)
    announce(plan)
    progress = SaturateProgress(sys.stderr.isatty() and fmt != "json")
    saturation = Saturation(plan, runner, listener=progress, storage=storage, storage_source=source)
    try:
        outcome = saturation.run()
    finally:
        progress.clear()
    finish(outcome, report(outcome, fmt=fmt, json_path=json_path, csv_path=csv_path))


def report(outcome, *, fmt: str, json_path: str | None, csv_path: str | None) -> int:
    """Print the saturation, then write the files asked for (``output.files``: ``-`` is stdout, a closed
    terminal loses no file); ExitCode.NOT_WRITTEN when one could not be written (a line said which), else 0."""
    from xferscope.export import json_text
    from xferscope.saturate.record import csv_text, saturation_to_dict
    from xferscope.saturate.report import print_saturation

    try:
        with human_output(json_path, csv_path):
            if fmt == "json":
                typer.echo(
                    json.dumps({k: v for k, v in saturation_to_dict(outcome).items() if k != "results"}, indent=2)
                )
            else:
                print_saturation(outcome, typer.echo)
    except OSError:
        pass
    return write_outputs(
        [
            Output("JSON", "--json", json_path, lambda: json_text(saturation_to_dict(outcome))),
            Output("CSV", "--csv", csv_path, lambda: csv_text(outcome)),
        ]
    )


def finish(outcome, written: int = 0) -> None:
    """The exit code: interrupted 130, a failed run 1, nothing measured 1, then ``written`` (4: a file asked
    for was not written)."""
    if outcome.stopped == "interrupted":
        typer.echo("xferscope: interrupted; what was measured is above", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    if outcome.failed:
        typer.echo(f"xferscope: {outcome.stopped}", err=True)
        raise typer.Exit(int(ExitCode.RUN_FAILED))
    if written:
        raise typer.Exit(written)
