"""`xferscope compare`: several transfer paths with one spec, in rotated rounds over one dataset, side by side."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from xferscope.commands.option_groups import SPEC_OPTIONS, SpecOptions, takes
from xferscope.commands.options import (
    FormatOpt,
    JsonOpt,
    MarginOpt,
    MpiOpt,
    WideOpt,
    check_format,
    check_margin,
    parse_path,
    wide_tables,
)
from xferscope.compare.verdict import MAX_ROUNDS, START_ROUNDS
from xferscope.errors import ExitCode, SpecError
from xferscope.output.files import check_outputs, end_of_run
from xferscope.output.terminal import install_hangup_handlers
from xferscope.workloads.registry import NAMES

CompareCsvOpt = Annotated[
    str | None,
    typer.Option(
        "--csv",
        help="write one row per run (round, place, ratio to the baseline in that round, verdict, figures) to FILE",
    ),
]
SkipOpt = Annotated[
    bool, typer.Option("--skip-unavailable", help="leave out paths that cannot run here instead of failing")
]
DropCacheOpt = Annotated[
    bool,
    typer.Option(
        "--drop-cache/--no-drop-cache",
        help="evict the compared files' pages from the page cache before every run (no root needed; the rest "
        "of the cache is left alone)",
    ),
]
SavedMemOpt = Annotated[
    str | None,
    typer.Option(
        "--mem",
        help="instead of running paths: memory results side by side, a comma list of mem --json or import mlc "
        "--json files, or saved mlc output",
    ),
]
SavedWorkloadOpt = Annotated[
    str | None,
    typer.Option(
        "--workload",
        help="instead of running paths: saved runs of one workload side by side, a comma list of its --json files "
        f"({NAMES}) or DLIO's summary.json, ranked as `workload compare` ranks them (to run "
        "paths of a workload side by side: workload train --path a,b,c)",
    ),
]
RoundsOpt = typer.Option(
    "auto",
    "--rounds",
    "-R",
    help=f"auto (default): {START_ROUNDS} rounds, then one more while any path is undecided, up to --max-rounds; "
    "or a number of rounds. Each round runs every path once, the order rotated; the ratios paired per round give "
    "an interval and the verdict (see --margin); 1 is a single pass with no verdict",
)
MaxRoundsOpt = typer.Option(
    None, "--max-rounds", help=f"with --rounds auto: the most rounds (default {MAX_ROUNDS}; {START_ROUNDS} to 50)"
)


@takes(SpecOptions)
def compare_command(
    paths: str = typer.Option(
        "host,bounce,bounce-async,cufile",
        "--paths",
        "-P",
        help="comma list of paths (or gdsio -x numbers); the first is the baseline; a path "
        "may repeat (host,host: an A/A check of the noise)",
    ),
    rounds: str = RoundsOpt,
    max_rounds: int | None = MaxRoundsOpt,
    margin: MarginOpt = 0.05,
    options: SpecOptions = SPEC_OPTIONS,
    json_path: JsonOpt = None,
    csv_path: CompareCsvOpt = None,
    fmt: FormatOpt = "table",
    skip_unavailable: SkipOpt = False,
    drop_cache: DropCacheOpt = True,
    mpi: MpiOpt = False,
    mem: SavedMemOpt = None,
    workload: SavedWorkloadOpt = None,
    wide: WideOpt = False,
) -> None:
    """Run several paths with the same spec in rotated rounds over one dataset; print each path's median with
    its range, the paired ratio to the first path and a verdict (seed 001's table)."""
    check_format(fmt)
    check_margin(margin)
    wide_tables(wide)
    check_outputs(fmt, {"--json": json_path, "--csv": csv_path}, folders=not mpi)
    from xferscope.compare.rounds import rounds_plan

    planned_rounds, most_rounds = rounds_plan(rounds, max_rounds)
    if mem is not None or workload is not None:
        return _saved_side_by_side(mem, workload, fmt=fmt, json_path=json_path, csv_path=csv_path)

    def make_specs():
        return _specs(paths, options, skip_unavailable)

    if mpi:
        from xferscope.cluster.runs import compare_mpi

        return compare_mpi(
            make_specs,
            gpu_given=options.gpu is not None,
            drop_cache=drop_cache,
            fmt=fmt,
            json_path=json_path,
            csv_path=csv_path,
            rounds=planned_rounds,
            auto=most_rounds is not None,
            margin=margin,
        )
    from xferscope.compare.rounds import RoundsComparison

    comp = RoundsComparison(make_specs(), planned_rounds, most_rounds, margin)
    _run_and_report(comp, drop_cache=drop_cache, fmt=fmt, json_path=json_path, csv_path=csv_path)


def _run_and_report(comp, *, drop_cache: bool, fmt: str, json_path: str | None, csv_path: str | None) -> None:
    """Run the comparison here, print it and write its files; exit with what its end calls for."""
    install_hangup_handlers()
    outcome = run_comparison(comp, drop_cache=drop_cache, live=sys.stderr.isatty() and fmt != "json")
    if not comp.done():
        raise typer.Exit(int(ExitCode.RUN_FAILED if outcome.failed else ExitCode.INTERRUPTED))
    from xferscope.output.compare import emit_comparison

    written = emit_comparison(comp, fmt=fmt, json_path=json_path, csv_path=csv_path)
    end_of_run("interrupted" if outcome.interrupted else "failed" if outcome.failed else "ok", written)


def _saved_side_by_side(mem: str | None, workload: str | None, **outputs) -> None:
    """``--mem`` or ``--workload``: saved results side by side instead of running paths."""
    if mem is not None:
        from xferscope.commands.mem_compare import compare_mem

        return compare_mem(mem, **outputs)
    from xferscope.commands.workload_kinds import compare_saved

    files = [f.strip() for f in (workload or "").split(",") if f.strip()]
    if not files:
        raise SpecError("workload", "give at least one saved workload run")
    return compare_saved(files, **outputs)


def _specs(paths: str, options: SpecOptions, skip_unavailable: bool) -> list:
    """One validated spec per path that can run here (those that cannot: skipped with the reason, or refused)."""
    from xferscope.engines.registry import unavailable_reason
    from xferscope.errors import EngineUnavailable

    names = [parse_path(p) for p in paths.split(",") if p.strip()]
    if not names:
        raise SpecError("paths", "give at least one path, e.g. --paths host,bounce")
    chosen = []
    for name in names:
        reason = unavailable_reason(name)
        if reason and skip_unavailable:
            typer.echo(f"xferscope: skipping {name}: {reason}", err=True)
            continue
        chosen.append((options.spec(name), reason))  # every spec first: a path's package missing is exit 2
    for spec, reason in chosen:
        if reason:
            raise EngineUnavailable(spec.path, reason + " (use --skip-unavailable to compare the others)")
    specs = [spec for spec, _ in chosen]
    if not specs:
        raise EngineUnavailable(",".join(names), "none of these paths can run here")
    return specs


class RoundsOutcome:
    def __init__(self):
        self.interrupted = False
        self.failed: set[int] = set()  # slots whose run failed (not run again in later rounds)


def run_comparison(comp, *, drop_cache: bool, live: bool) -> RoundsOutcome:
    """Prepare the dataset once, then run the plan round by round, filling ``comp``; the dataset is removed
    at the end, also on Ctrl-C or failure. Prints the plan, the page-cache warning and failures on stderr."""
    from xferscope.commands.compare_progress import RoundsProgress, plan_text
    from xferscope.run.dataset import SharedDataset
    from xferscope.run.runner import EngineDied, EngineRun
    from xferscope.target import Interrupted

    outcome = RoundsOutcome()
    dataset = SharedDataset(comp.specs[0])
    dataset.plan()
    typer.echo(f"xferscope: {plan_text(comp, dataset.size, dataset.to_fill)}", err=True)
    progress = RoundsProgress(live, comp)
    try:
        try:
            dataset.prepare(progress=progress.fill)
        except KeyboardInterrupt:
            raise Interrupted("interrupted while preparing the dataset; nothing was measured") from None
        finally:
            progress.clear()
        from xferscope.run.engine_pool import kept_engines

        with kept_engines():  # the runs of each path share one engine process
            for i, planned in enumerate(comp.runs):
                if planned.slot in outcome.failed:
                    continue
                warning = comp.before_run(drop_cache, dataset.files)
                if warning:
                    typer.echo(f"xferscope: {warning}", err=True)
                progress.begin(i)
                run = EngineRun(dataset.spec_for(planned.spec))
                try:
                    planned.result = run.execute(on_sample=progress.sample)
                except (KeyboardInterrupt, Interrupted):
                    planned.result = run.result
                    outcome.interrupted = True
                except Exception as exc:
                    partial = getattr(exc, "result", None)
                    if partial is None and not isinstance(exc, EngineDied):  # a path whose process died goes on
                        raise
                    planned.result = partial
                    outcome.failed.add(planned.slot)
                    progress.clear()
                    typer.echo(
                        f"xferscope: round {planned.round + 1}: {exc}"
                        + ("; not run again" if planned.round + 1 < comp.rounds else ""),
                        err=True,
                    )
                finally:
                    progress.clear()
                progress.end()
                planned.files = dataset.identity()
                ended = planned.result is not None and planned.result.status == "interrupted"
                if outcome.interrupted or ended or run.stopped_by_user:  # Ctrl-C as a run ended stops here too
                    outcome.interrupted = True
                    break
                added = comp.add_round_if_undecided()
                if added:
                    progress.clear()
                    typer.echo(f"xferscope: {added}", err=True)
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        progress.clear()
        dataset.close()
    return outcome


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)
