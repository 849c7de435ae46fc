"""`run --mpi` and `compare --mpi`: a run, or a comparison in rounds, once per rank, with rank 0 doing the talking.

Every rank runs the command; rank 0 shows the live line, writes the files and
prints the result; the other ranks print nothing and exit with the same code as
rank 0. On Ctrl-C rank 0 saves what was measured so far at once (the launcher
may kill the ranks soon after), then again once every rank has stopped.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
from collections.abc import Callable

import typer

from xferscope.cluster.layout import RankPlace, rank_files
from xferscope.cluster.report import cluster_lines, cluster_progress_text, layout_line, slowest_line, whole_job
from xferscope.cluster.session import (
    FollowerExit,
    agree_or_raise,
    build_on_rank,
    run_spec_mpi,
    same_on_every_rank,
)
from xferscope.cluster.world import World, open_world
from xferscope.compare.rounds import RoundsComparison
from xferscope.compare.verdict import MARGIN
from xferscope.errors import ExitCode, RunFailed
from xferscope.output.compare import comparison_outputs, emit_comparison, print_comparison
from xferscope.output.files import echo_lines, end_of_run, result_outputs, save_partial
from xferscope.output.run import execute_and_report
from xferscope.output.terminal import ProgressLine, install_hangup_handlers
from xferscope.spec import RunSpec
from xferscope.target import default_scratch_parent


class ClusterProgress(ProgressLine):
    """The live line on rank 0's terminal: the whole job, and the slowest host."""

    def sample(self, s, per_host=None) -> None:
        if not self.enabled or s is None or s.t - self._last < 0.25:
            return
        self._last = s.t
        self._write("\r\033[K" + cluster_progress_text(s, per_host or {}, self.duration))


def print_cluster_run(results) -> None:
    for r in results:
        echo_lines(cluster_lines(r))


def _note_single_rank(world: World) -> None:
    if world.size == 1 and world.launcher == "none":
        typer.echo(
            "xferscope: --mpi with one rank: start it with mpirun -np N (or srun) to run on several hosts", err=True
        )


def run_mpi(
    make_spec: Callable[[], RunSpec], *, gpu_given: bool, fmt: str, json_path: str | None, csv_path: str | None
) -> None:
    world = open_world()
    root = world.is_root
    spec, vote = build_on_rank(make_spec, world)
    install_hangup_handlers()
    progress = ClusterProgress(root and sys.stderr.isatty() and fmt != "json", spec.duration if spec else None)
    if root:
        _note_single_rank(world)

    def save_partial_result(result) -> None:
        save_partial(result_outputs([result], json_path, csv_path))

    def execute():
        agree_or_raise(world, vote, "the spec check")
        return run_spec_mpi(
            spec,
            gpu_given=gpu_given,
            on_sample=progress.sample if root else None,
            on_partial=save_partial_result if root else None,
            progress=progress.fill if root else None,
        )

    try:
        execute_and_report(
            execute, progress, fmt=fmt, json_path=json_path, csv_path=csv_path, printer=print_cluster_run
        )
    except FollowerExit as exc:
        raise typer.Exit(exc.code) from None


def _same_paths(world: World, specs: list[RunSpec]) -> None:
    """Every rank must run the same paths in the same order (a path may be unavailable on one host)."""

    def differs(rank: int, host: str, paths: list[str], first: list[str]) -> str:
        return (
            f"rank {rank} on {host} would run {','.join(paths) or 'no path'} but rank 0 would run "
            f"{','.join(first)}: every host needs the same paths (see `xferscope doctor` there)"
        )

    same_on_every_rank(world, [s.path for s in specs], differs, ExitCode.ENVIRONMENT, key=tuple)


def _scratch_per_rank(world: World, specs: list[RunSpec]) -> tuple[list[RunSpec], str | None]:
    """With no --file/--dir, one scratch file per rank shared by all paths (as `compare` does on one host)."""
    if specs[0].file or specs[0].directory:
        return specs, None

    token = world.comm.bcast(secrets.token_hex(4) if world.is_root else None, root=0)
    parent = default_scratch_parent()[0]
    template = os.path.join(parent, f"xferscope-compare-{token}-{{rank}}")
    mine = template.replace("{rank}", str(world.rank))
    os.makedirs(mine, exist_ok=True)
    file = os.path.join(template, "xferscope-scratch.dat")
    return [s.replace(file=file, keep=True) for s in specs], mine


def compare_mpi(
    make_specs: Callable[[], list[RunSpec]],
    *,
    gpu_given: bool,
    drop_cache: bool,
    fmt: str,
    json_path: str | None,
    csv_path: str | None,
    rounds: int = 1,
    auto: bool = False,
    margin: float = MARGIN,
) -> None:
    """`compare --mpi`: the rounds of ``compare`` (order rotated), each run across every rank. With ``--rounds
    auto`` it runs the rounds auto starts with and says so: adding rounds would need every rank to agree."""

    world = open_world()
    root = world.is_root
    specs, vote = build_on_rank(make_specs, world)
    install_hangup_handlers()
    if root:
        _note_single_rank(world)
        if auto:
            typer.echo(f"xferscope: under --mpi, --rounds auto runs {rounds} rounds and adds none", err=True)
    try:
        agree_or_raise(world, vote, "the spec check")
        _same_paths(world, specs)
    except FollowerExit as exc:
        raise typer.Exit(exc.code) from None
    specs, scratch = _scratch_per_rank(world, specs)
    comp = RoundsComparison(specs, rounds, margin=margin)
    try:
        follower_code, interrupted, failed = _compare_rounds(
            world, comp, specs, gpu_given=gpu_given, drop_cache=drop_cache, fmt=fmt, json_path=json_path
        )
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    if not root:
        raise typer.Exit(follower_code)
    if not comp.done():
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    written = emit_comparison(comp, fmt=fmt, json_path=json_path, csv_path=csv_path, printer=_print_compare_cluster)
    cut_short = interrupted or len(comp.done()) < len(comp.runs)
    end_of_run("interrupted" if cut_short else "failed" if failed else "ok", written)


def _compare_rounds(
    world, comp, specs: list[RunSpec], *, gpu_given: bool, drop_cache: bool, fmt: str, json_path: str | None
) -> tuple[int, bool, bool]:
    """Every planned run of ``comp`` across the ranks, in order: (on ranks other than 0, the exit code rank 0 will
    have; interrupted; a run failed)."""

    root = world.is_root
    place = RankPlace(world.rank, socket.gethostname(), 0, 1)  # enough for {rank} and {host}
    follower_code = 0
    interrupted = failed = False

    def save_partial_comparison(planned, result) -> None:
        planned.result = result
        save_partial(comparison_outputs(comp, json_path, None))

    for planned in comp.runs:
        warning = comp.before_run(drop_cache, rank_files(specs[0], place))
        if root and warning:
            typer.echo(f"xferscope: {warning}", err=True)
        spec = planned.spec
        progress = ClusterProgress(root and sys.stderr.isatty() and fmt != "json", spec.duration)
        if progress.enabled:
            sys.stderr.write(f"round {planned.round + 1}/{comp.rounds} {comp.labels[planned.slot]}:\n")
        try:
            result = run_spec_mpi(
                spec,
                gpu_given=gpu_given,
                on_sample=progress.sample if root else None,
                on_partial=(lambda r, p=planned: save_partial_comparison(p, r)) if root else None,
                progress=progress.fill if root else None,
            )
        except FollowerExit as exc:
            if not exc.started:
                raise typer.Exit(exc.code) from None
            follower_code = exc.code
            if exc.code == ExitCode.INTERRUPTED:
                break
            continue
        except RunFailed as exc:
            progress.clear()
            planned.result = exc.result
            failed = True
            typer.echo(f"xferscope: {exc}", err=True)
            continue
        progress.clear()
        if result is not None:
            planned.result = result
            if result.status == "interrupted":
                interrupted = True
                break
    return follower_code, interrupted, failed


def _print_compare_cluster(comp) -> None:
    """The comparison of the whole job (per-host figures in the files), the layout, and each run's slowest host."""

    whole = RoundsComparison(comp.specs, comp.rounds, margin=comp.margin)
    whole.cache_note, whole.cache_dropped = comp.cache_note, comp.cache_dropped
    for mine, planned in zip(whole.runs, comp.runs):
        mine.result = whole_job(planned.result) if planned.result is not None else None
    print_comparison(whole)
    first = next(run.result for run in comp.runs if run.result is not None)
    typer.echo(layout_line(first) + "; the table shows the whole job")
    for planned in comp.runs:
        line = slowest_line(planned.result) if planned.result is not None else None
        if line:
            typer.echo(f"round {planned.round + 1} {comp.labels[planned.slot]}: {line}")
