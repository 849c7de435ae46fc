"""`replay --mpi`: a profile's grid across every rank of an MPI job, point by point, in step.

Rank 0 holds the profile and the results file and makes every decision (which
points are finished already, which to skip, when to stop); before each
repetition it tells the other ranks which spec to run next, and every rank
then runs that repetition through ``run_spec_mpi``. The other ranks only follow:
they print nothing and exit with rank 0's code.

Each step is an agreement (``World.agree``): rank 0 contributes the step, the
others contribute None, or "interrupted" after a Ctrl-C that reached them
between repetitions; an interrupted vote ends the sweep on every rank, with what
was measured saved. A point that some host cannot run (no GPU, no cuFile, no
O_DIRECT there) is skipped with that host's reason, as a single-host replay skips
it, and the sweep goes on. A point that fails otherwise (one rank's bad
directory, an I/O error during the run) ends the sweep: rank 0 records it,
saves, and reports that rank's error.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
from collections.abc import Callable
from typing import Any

import typer

from xferscope.cluster.layout import RankPlace, expand
from xferscope.cluster.runs import _note_single_rank
from xferscope.cluster.session import AgreedInterrupt, FollowerExit, RankFailed, failure_vote, run_spec_mpi
from xferscope.cluster.world import World, open_world
from xferscope.errors import EnvironmentProblem, ExitCode, RunFailed, XferscopeError
from xferscope.output.sweep import SweepProgress, print_plan
from xferscope.output.terminal import install_hangup_handlers
from xferscope.run.scratch import SweepScratch
from xferscope.spec import RunSpec
from xferscope.sweep.execute import SweepRun
from xferscope.target import default_scratch_parent
from xferscope.units import format_size

INTERRUPTED = "interrupted"
STEP = "the next point of the sweep"


class Steps:
    """The step every rank takes next: ("point", spec, gpu_given) or ("end", exit code)."""

    def __init__(self, world: World):
        self.world = world
        self.interrupted = False  # a Ctrl-C reached this rank outside an agreement

    def send(self, step: tuple) -> bool:
        """Rank 0: announce ``step``; False when another rank was interrupted (nobody takes it then)."""
        votes = self.world.agree(step, STEP)
        return INTERRUPTED not in votes[1:]

    def receive(self) -> tuple | None:
        """Other ranks: the step rank 0 announced; None when a rank was interrupted (the sweep ends next)."""
        mine = INTERRUPTED if self.interrupted else None
        self.interrupted = False
        votes = self.world.agree(mine, STEP, if_interrupted=INTERRUPTED)
        if votes[0][0] == "end" or INTERRUPTED not in votes[1:]:
            return votes[0]
        return None


class RankScratch:
    """A sweep's scratch files on this rank: made by the first point, kept between points, removed at the end.

    Specs keep their ``{rank}``/``{host}`` templates (every rank runs the same spec); this rank keeps
    track of the files in its own expansion of them. Without --dir/--file each rank gets a temporary
    directory of its own, named by a token that rank 0 chose (a collective call: make it on every rank)."""

    def __init__(self, world: World):

        token = world.comm.bcast(secrets.token_hex(4) if world.is_root else None, root=0)
        self.place = RankPlace(world.rank, socket.gethostname(), 0, 1)  # enough for {rank} and {host}
        self.files = SweepScratch()
        self.temp_template = os.path.join(default_scratch_parent()[0], f"xferscope-sweep-{token}-{{rank}}")
        self.temp_dir: str | None = None

    def adapt(self, spec: RunSpec) -> RunSpec:
        """The spec every rank runs; a template this rank cannot expand is left for ``run_spec_mpi`` to report."""
        if spec.file or spec.directory:
            try:
                self.files.adapt(
                    spec.replace(
                        file=expand(spec.file, "file", self.place), directory=expand(spec.directory, "dir", self.place)
                    )
                )
            except XferscopeError:
                pass
            return spec.replace(keep=True)
        if self.temp_dir is None:
            self.temp_dir = expand(self.temp_template, "dir", self.place)
            os.makedirs(self.temp_dir, exist_ok=True)
        name = f"xferscope-sweep-{format_size(spec.file_size)}.dat"
        return spec.replace(file=os.path.join(self.temp_template, name), keep=True)

    def cleanup(self) -> None:
        self.files.cleanup()
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None


class ClusterSweep(SweepRun):
    """Rank 0's sweep: each repetition announced to every rank, then run on all of them."""

    stop_on_failure = True

    def __init__(self, profile, results_path: str, *, steps: Steps, scratch: RankScratch, listener=None):
        super().__init__(profile, results_path, listener=listener)
        self.steps = steps
        self.rank_scratch = scratch
        self.gpu_given = "gpus" in profile.base or "gpus" in profile.grid
        self.failure: XferscopeError | None = None  # the error that ended the sweep

    def _execute_io(self, point, scratch, on_sample):

        spec = self.rank_scratch.adapt(point.spec)
        if not self.steps.send(("point", point.spec, self.gpu_given)):
            raise AgreedInterrupt("interrupted between points")
        try:
            return run_spec_mpi(spec, gpu_given=self.gpu_given, on_sample=on_sample)
        except RankFailed as exc:
            if exc.cannot_run_there:  # skipped with the host's reason; the next point goes on
                raise EnvironmentProblem(str(exc)) from None
            self.failure = exc
            raise
        except RunFailed as exc:
            self.failure = exc
            raise


def follow(steps: Steps, scratch: RankScratch) -> int:
    """The other ranks: take every step rank 0 announces until it ends the sweep; rank 0's exit code."""
    while True:
        try:
            step = steps.receive()
            if step is None:
                continue
            if step[0] == "end":
                return int(step[1])
            _, spec, gpu_given = step
            try:
                run_spec_mpi(scratch.adapt(spec), gpu_given=gpu_given)
            except FollowerExit:
                pass  # rank 0 reports and decides what comes next
        except KeyboardInterrupt:
            steps.interrupted = True


def _plan_on_root(world: World, plan: Callable[[int], Any]):
    """Rank 0 reads the profile and checks the command; its error ends every rank (rank 0 prints it)."""
    made, error, vote = None, None, None
    if world.is_root:
        try:
            made = plan(world.size)
        except (XferscopeError, ValueError) as exc:
            error, vote = exc, failure_vote(exc)
    votes = world.agree(vote, "the profile check", if_interrupted=failure_vote(KeyboardInterrupt()))
    if error is not None:
        raise error
    failed = [v for v in votes if v is not None]
    if failed:
        if world.is_root:
            typer.echo("xferscope: interrupted", err=True)
            raise typer.Exit(int(ExitCode.INTERRUPTED))
        raise typer.Exit(int(failed[0][1]))
    return made


def lead_and_follow(plan: Callable[[int], Any], lead: Callable[[Any, Steps, RankScratch], None]) -> None:
    """On every rank of the job: rank 0 builds the plan (``plan(ranks)``) and calls ``lead(plan, steps,
    scratch)``, which announces each step before it runs it; the other ranks follow those steps. Every rank
    ends with rank 0's exit code (``typer.Exit``)."""
    world = open_world()
    made = _plan_on_root(world, plan)
    install_hangup_handlers()
    steps = Steps(world)
    scratch = RankScratch(world)
    if not world.is_root:
        try:
            code = follow(steps, scratch)
        finally:
            scratch.cleanup()
        raise typer.Exit(code)
    _note_single_rank(world)
    code = int(ExitCode.RUN_FAILED)
    try:
        lead(made, steps, scratch)
        code = 0
    except typer.Exit as exc:
        code = int(exc.exit_code or 0)
        raise
    except XferscopeError as exc:
        code = int(exc.exit_code)
        raise
    except KeyboardInterrupt:
        code = int(ExitCode.INTERRUPTED)
        raise
    finally:
        scratch.cleanup()
        _end(steps, code)


def replay_mpi(plan: Callable[[int], Any], report: Callable[..., None], *, dry_run: bool) -> None:
    """``replay --mpi`` on one rank. ``plan(ranks)`` builds the ReplayPlan (rank 0 only); ``report(outcome,
    plan, progress, failure)`` prints and raises typer.Exit with the replay's code (rank 0 only)."""

    def lead(made, steps: Steps, scratch: RankScratch) -> None:
        progress = SweepProgress(made.profile.point_count)
        sweep = ClusterSweep(made.profile, made.results_path, steps=steps, scratch=scratch, listener=progress)
        if dry_run:
            print_plan(sweep, made.results_path)
            return
        try:
            outcome = sweep.run()
        finally:
            scratch.cleanup()
        report(outcome, made, progress, sweep.failure)

    lead_and_follow(plan, lead)


def _end(steps: Steps, code: int) -> None:
    """Tell every rank that the sweep is over, and rank 0's exit code (Ctrl-C cannot stop this)."""
    while True:
        try:
            steps.send(("end", code))
            return
        except KeyboardInterrupt:
            continue
