"""`xferscope replay PROFILE|NAME`: run a profile's grid headless, with repetitions, resume, ratios and plots."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Annotated

import typer

from xferscope.commands.option_groups import takes
from xferscope.commands.options import (
    FormatOpt,
    MarginOpt,
    MpiOpt,
    WideOpt,
    check_format,
    check_margin,
    parse_sets,
    wide_tables,
)
from xferscope.compare.verdict import MARGIN
from xferscope.errors import ExitCode, SpecError, XferscopeError
from xferscope.output.terminal import install_hangup_handlers

ProfileArg = Annotated[str, typer.Argument(metavar="PROFILE|NAME", help="a profile name or a .toml file")]
DurationOpt = Annotated[str | None, typer.Option("--duration", "-T", metavar="S", help="seconds per point")]
RepsOpt = Annotated[int | None, typer.Option("--reps", metavar="N", help="repetitions per point")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set", metavar="FIELD=VALUE", help="fix a field: --set block_size=64K (repeatable; removes that grid axis)"
    ),
]
ResultsOpt = Annotated[
    str | None,
    typer.Option("--results", metavar="FILE", help="results JSON (CSV beside it); rerun with the same file to resume"),
]
AgainstOpt = Annotated[
    str | None,
    typer.Option(
        "--against", metavar="FILE", help="earlier results to compare each point with (replay, run, import output)"
    ),
]
FailBelowOpt = Annotated[
    float | None,
    typer.Option("--fail-below", metavar="R", help="with --against: exit 1 when a point's ratio is below R"),
]
PlotOpt = Annotated[
    str | None, typer.Option("--plot", metavar="FILE", help="draw the results into FILE.svg or FILE.png")
]
DirOpt = Annotated[
    str | None, typer.Option("--dir", "-D", metavar="D", help="run in this directory (one file per worker)")
]
FileOpt = Annotated[str | None, typer.Option("--file", "-f", metavar="F", help="run on this file")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="list the points and what is left to run")]


def default_results_path(name: str) -> str:
    return f"{name}.results.json"


def results_paths(given: str | None, name: str) -> str:
    """The JSON results file (the CSV goes beside it, same name, .csv)."""
    from xferscope.safe_write import is_stream

    path = given or default_results_path(name)
    if path.endswith(".csv"):
        path = path[:-4] + ".json"
    if is_stream(path):
        raise SpecError(
            "results",
            f"{path} is not a regular file: the results are rewritten after every point "
            "and read back to resume; name a file",
        )
    target = os.path.realpath(path)
    if os.path.isdir(target):
        raise SpecError("results", f"{path} is a folder; name a file")
    directory = os.path.dirname(target)
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise SpecError("results", f"cannot write {path}: {directory} is not a writable directory")
    return path


def prepared_profile(
    name: str,
    duration: str | None,
    reps: int | None,
    sets: list[str],
    directory: str | None,
    file: str | None,
    *,
    mpi_size: int | None = None,
):
    """The profile with the command line's changes, every point checked; ``mpi_size``: the ranks of an
    ``--mpi`` job (None without --mpi), checked against the ranks the profile needs."""
    from xferscope.profiles import load_profile
    from xferscope.profiles.fields import to_seconds

    profile = load_profile(name)
    profile.check_ranks(mpi_size is not None, mpi_size)
    if mpi_size is not None and profile.kind == "mem":
        raise SpecError("mpi", f"{profile.name} is a memory sweep, measured on one host: replay it without --mpi")
    changes = parse_sets(sets)
    if directory and file:
        raise SpecError("dir", "give either --dir or --file, not both")
    per_rank = mpi_size is not None and "{" in (directory or file or "")  # each rank checks its own
    if directory:
        if not per_rank and not os.path.isdir(directory):
            raise SpecError("dir", f"{directory} is not a directory (create it, or check the mount)")
        changes["directory"] = directory
    if file:
        if not per_rank and not os.path.isdir(os.path.dirname(os.path.abspath(file))):
            raise SpecError("file", f"the directory of {file} does not exist")
        changes["file"] = file
    seconds = None
    if duration is not None:
        try:
            seconds = to_seconds(duration)
        except ValueError as exc:
            raise SpecError("duration", str(exc)) from None
    profile = profile.with_changes(duration=seconds, repetitions=reps, sets=changes)
    profile.points()  # every point valid before anything runs
    return profile


@dataclass
class ReplayPlan:
    """What a replay needs before it measures: the profile, where results go, what to compare with."""

    profile: object
    results_path: str
    old: object  # OldResults or None


def check_options(fmt: str, against: str | None, fail_below: float | None, plot: str | None) -> None:
    from xferscope.sweep.plot import check_plot_path

    check_format(fmt)
    if fail_below is not None and not against:
        raise SpecError("fail-below", "compares against earlier results: give --against FILE too")
    if fail_below is not None and not fail_below > 0:
        raise SpecError("fail-below", f"must be a ratio above 0, e.g. 0.9, got {fail_below}")
    if plot:
        check_plot_path(plot)


def plan_replay(
    profile_name: str,
    duration: str | None,
    reps: int | None,
    sets: list[str],
    directory: str | None,
    file: str | None,
    results: str | None,
    against: str | None,
    *,
    mpi_size: int | None = None,
) -> ReplayPlan:
    from xferscope.sweep.against import OldResults

    profile = prepared_profile(profile_name, duration, reps, sets, directory, file, mpi_size=mpi_size)
    results_path = results_paths(results, profile.name)
    return ReplayPlan(profile, results_path, OldResults(against, profile.kind) if against else None)


@dataclasses.dataclass(frozen=True)
class ReplayOptions:
    """How a profile is replayed: its duration, repetitions and overrides, what it is held against, where its
    results go."""

    duration: DurationOpt = None
    reps: RepsOpt = None
    sets: SetOpt = None
    results: ResultsOpt = None
    against: AgainstOpt = None
    fail_below: FailBelowOpt = None
    margin: MarginOpt = 0.05
    plot: PlotOpt = None
    directory: DirOpt = None
    file: FileOpt = None
    fmt: FormatOpt = "table"
    dry_run: DryRunOpt = False
    mpi: MpiOpt = False
    wide: WideOpt = False


@takes(ReplayOptions)
def replay_command(profile_name: ProfileArg, options: ReplayOptions) -> None:
    """Replay a profile: every point of its grid, repeated, one row per point with median, stdev, min, max
    (a saturate profile runs its knee searches, as `xferscope saturate --profile NAME`)."""
    from xferscope.output.sweep import SweepProgress, print_plan
    from xferscope.profiles import load_profile
    from xferscope.sweep import SweepRun

    o = options
    try:
        held = load_profile(profile_name)
    except XferscopeError:  # reported below, by rank 0 alone under --mpi (whose followers take the same steps)
        held = None
    if held is not None and held.kind in ("workload", "saturate"):
        return _replay_other_kind(held, o)
    check_options(o.fmt, o.against, o.fail_below, o.plot)
    check_margin(o.margin)
    wide_tables(o.wide)
    outputs = {"against": o.against, "fail_below": o.fail_below, "plot": o.plot, "fmt": o.fmt, "margin": o.margin}
    sets = o.sets or []
    if o.mpi:
        from xferscope.cluster.replay import replay_mpi

        def plan(size: int) -> ReplayPlan:
            return plan_replay(
                profile_name, o.duration, o.reps, sets, o.directory, o.file, o.results, o.against, mpi_size=size
            )

        return replay_mpi(
            plan,
            lambda outcome, plan, progress, failure: report(outcome, plan, progress, failure=failure, **outputs),
            dry_run=o.dry_run,
        )
    plan = plan_replay(profile_name, o.duration, o.reps, sets, o.directory, o.file, o.results, o.against)
    progress = SweepProgress(plan.profile.point_count)
    sweep = SweepRun(plan.profile, plan.results_path, listener=progress)
    if o.dry_run:
        print_plan(sweep, plan.results_path)
        return
    install_hangup_handlers()
    report(sweep.run(), plan, progress, **outputs)


def _replay_other_kind(held, o: ReplayOptions) -> None:
    """A workload profile (its runs) or a saturate profile (its knee searches): what of the options applies."""
    if held.kind == "workload":
        return replay_workload(
            held,
            duration=o.duration,
            directory=o.directory,
            results=o.results,
            fmt=o.fmt,
            not_for={
                "--reps": o.reps,
                "--set": o.sets,
                "--against": o.against,
                "--fail-below": o.fail_below,
                "--plot": o.plot,
                "--file": o.file,
                "--mpi": o.mpi or None,
                "--dry-run": o.dry_run or None,
            },
        )
    from xferscope.commands.saturate import replay_plan

    return replay_plan(
        held,
        duration=o.duration,
        sets=o.sets or [],
        directory=o.directory,
        file=o.file,
        results=o.results,
        fmt=o.fmt,
        dry_run=o.dry_run,
        mpi=o.mpi,
        not_for_plans={"--reps": o.reps, "--against": o.against, "--fail-below": o.fail_below, "--plot": o.plot},
    )


def replay_workload(profile, *, duration, directory, results, fmt: str, not_for: dict) -> None:
    """A workload profile: its [workload] fields run as its command's options (``workload_kinds``), with the
    replay's --dir, --results, --format and --duration (the profile's own duration where the command takes one)."""
    from xferscope.commands.profile_options import command_of, run_as_command
    from xferscope.commands.workload_kinds import WORKLOADS, command_named

    given = [option for option, value in not_for.items() if value]
    if given:
        raise SpecError(given[0].lstrip("-"), f"{given[0]} is not for a workload profile (it replays one workload)")
    name = str(profile.workload.get("workload", "train"))
    function = command_named(name)
    if function is None:
        raise SpecError(
            "workload", f"{profile.name}: no workload {name!r} (one of {', '.join(w.name for w in WORKLOADS)})"
        )
    command = command_of(function, name)
    takes_duration = any(p.name == "duration" for p in command.params)
    if duration is not None and not takes_duration:
        raise SpecError(
            "duration", f"workload {name} has no option --duration: --duration is not for a {name} profile (it runs "
            "to its own end)"
        )  # fmt: skip
    if duration is None and takes_duration and profile.duration is not None:
        duration = str(profile.duration)
    fields = {k: v for k, v in profile.workload.items() if k != "workload"}
    extra = {"directory": directory, "json": results, "format": fmt, "duration": duration}
    return run_as_command(command, name, fields, extra)


def report(
    outcome,
    plan: ReplayPlan,
    progress,
    *,
    against: str | None,
    fail_below: float | None,
    plot: str | None,
    fmt: str,
    margin: float = MARGIN,
    failure: XferscopeError | None = None,
) -> None:
    """Print the summary and where the files went; raise typer.Exit with the replay's exit code.
    ``failure``: the error that ended the sweep early (a rank's, under --mpi), printed and its code used."""
    from xferscope.sweep.against import below, below_without_verdict, ratios

    progress.clear()
    results_path = plan.results_path
    if outcome.interrupted and outcome.not_written is None:
        # said first: under mpirun, Ctrl-C gives the ranks a second (Open MPI's odls_base_sigkill_timeout)
        typer.echo(f"xferscope: interrupted; rerun the same command to resume from {results_path}", err=True)
    if progress.earlier:
        typer.echo(f"{progress.earlier} point(s) finished earlier in {results_path} were kept", err=True)
    found = ratios(outcome.results, plan.old, margin) if plan.old else None
    low = below(found, fail_below) if found is not None and fail_below is not None else []
    unsure = below_without_verdict(found, fail_below) if found is not None and fail_below is not None else []
    _print_summary(outcome.results, found, against, fmt)
    _say_files(outcome, results_path)
    plot_code = _plot(plot, outcome.results) if plot else 0
    if outcome.not_written is not None:
        raise typer.Exit(int(outcome.not_written.exit_code))
    if outcome.interrupted:
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    if unsure:
        shown = ", ".join(
            f"{r.label} ({r.ratio:.2f}, {r.verdict.text if r.verdict else 'no verdict'})" for r in unsure[:5]
        ) + (", ..." if len(unsure) > 5 else "")
        typer.echo(
            f"xferscope: {len(unsure)} point(s) below {fail_below:g} but not slower under the rule, so not "
            f"counted as regressions (more repetitions, --reps, on both sides can tell): {shown}",
            err=True,
        )
    if low:
        shown = ", ".join(f"{r.label} ({r.ratio:.2f})" for r in low[:5]) + (", ..." if len(low) > 5 else "")
        typer.echo(
            f"xferscope: {len(low)} of {len(found)} points slower and below {fail_below:g} of {against}: {shown}",
            err=True,
        )
        raise typer.Exit(int(ExitCode.RUN_FAILED))
    if failure is not None:
        point = outcome.failed[0] if outcome.failed else None
        where = f"point {point.index} ({point.label}): " if point else ""
        typer.echo(f"xferscope: {where}{failure}; rerun the same command to resume from {results_path}", err=True)
        raise typer.Exit(int(failure.exit_code))
    if outcome.failed:
        typer.echo(f"xferscope: {len(outcome.failed)} point(s) failed; their reasons are in {results_path}", err=True)
        raise typer.Exit(int(ExitCode.RUN_FAILED))
    if not any(rec.ok_count() for rec in outcome.results.planned()):
        typer.echo("xferscope: none of the points can run on this machine; the reasons are above", err=True)
        raise typer.Exit(int(ExitCode.ENVIRONMENT))
    if plot_code:
        raise typer.Exit(plot_code)


def _say_files(outcome, results_path: str) -> None:
    """Where the results went, or that they could not be written and what the file still holds."""
    if outcome.not_written is None:
        for label, path in (("results", outcome.results.path), ("CSV", outcome.results.csv_path)):
            typer.echo(f"{label} written to {path}", err=True)
        return
    typer.echo(
        f"xferscope: {outcome.not_written} (results shown above); the sweep stopped there. {results_path} "
        f"holds the {outcome.results.saved_repetitions} repetition(s) saved before it: make room and rerun the "
        "same command to resume",
        err=True,
    )


def _plot(path: str, results) -> int:
    """Draw ``--plot`` after the summary was printed; 4 when the file cannot be written."""
    from xferscope.output.files import Output, write_outputs
    from xferscope.sweep.plot import render_plot

    content = render_plot(path, results)
    if content is None:
        typer.echo("xferscope: nothing measured yet, so no plot was drawn", err=True)
        return 0
    return write_outputs([Output("plot", "--plot", path, lambda: content)], shown="results shown above")


def _print_summary(results, found, against: str | None, fmt: str) -> None:
    from xferscope.sweep.summary import SUMMARY_FIRST_COLUMNS, skipped_lines, summary_json, summary_table

    try:
        if fmt == "json":
            from xferscope.records import json_text

            typer.echo(json_text(summary_json(results, found)), nl=False)
            for line in skipped_lines(results):
                typer.echo(line, err=True)
            return
        from xferscope.report import print_table

        title = f"{results.profile.name}" + (f" against {os.path.basename(against)}" if against else "")
        if any(rec.repetitions for rec in results.planned()):
            print_table(summary_table(results, found, title=title), first=SUMMARY_FIRST_COLUMNS)
            if found is not None:
                from xferscope.compare.verdict import rule_text

                typer.echo(rule_text(found[0].margin if found else MARGIN, repeated=True))
        for line in skipped_lines(results):
            typer.echo(line)
    except OSError:  # closed terminal: the files are written already
        pass


def register(app: typer.Typer) -> None:
    app.command("replay")(replay_command)
