"""One benchmark across every rank of an MPI job: ``run_spec_mpi``.

The steps, on every rank:

1. agree on the layout (hosts, local ranks) and on each rank's spec
   (placeholders, GPUs, CPUs); a rank whose spec is bad stops them all;
2. prepare (plan and create the target, set up the engine), in waves when the
   target is shared; any rank's failure is every rank's, reported by rank 0;
3. barrier, then start the timed region together; ranks stop together when
   one fails or the user interrupts (see ``exchange``);
4. rank 0 sends the outcome to all, every rank cleans up, rank 0 returns the
   aggregate ``RunResult`` (per host in ``result.hosts``).
"""

from __future__ import annotations

import contextlib
import io
import socket
from collections.abc import Callable
from typing import TypeVar

from xferscope.cluster.exchange import Follower, Leader
from xferscope.cluster.layout import Layout, describe_me, layout_from, prepare_waves, rank_spec
from xferscope.cluster.merge import cluster_result
from xferscope.cluster.records import RecordMaker
from xferscope.cluster.world import SyncTimeout, World, open_world
from xferscope.engines.base import RunResult, Sample
from xferscope.errors import EnvironmentProblem, ExitCode, RunFailed, XferscopeError
from xferscope.records import ClusterFacts
from xferscope.run.runner import EngineRun
from xferscope.spec import RunSpec
from xferscope.target import Interrupted

T = TypeVar("T")


class RankFailed(XferscopeError):
    """A rank failed before the timed region; rank 0 says which and why, with that error's exit code.

    ``cannot_run_there``: every failing rank's host lacks what the run needs (no GPU, no cuFile,
    no O_DIRECT: an EnvironmentProblem), as opposed to bad input or a failing run."""

    def __init__(self, message: str, exit_code: int, *, cannot_run_there: bool = False):
        super().__init__(message)
        self.exit_code = exit_code
        self.cannot_run_there = cannot_run_there


class AgreedInterrupt(Interrupted):
    """Every rank learnt that one was interrupted before the timed region."""


class FollowerExit(Exception):
    """On ranks other than 0: the cluster run ended with ``code``; rank 0 has said why."""

    def __init__(self, code: int, *, started: bool):
        super().__init__(code)
        self.code = int(code)
        self.started = started  # False: the run failed before its timed region


def failure_vote(exc: BaseException) -> tuple[str, int, str, bool]:
    """What a rank tells the others about its failure: (message, exit code, host, cannot run there)."""
    host = socket.gethostname()
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", int(ExitCode.INTERRUPTED), host, False
    if isinstance(exc, XferscopeError):
        return str(exc), int(exc.exit_code), host, isinstance(exc, EnvironmentProblem)
    return f"{type(exc).__name__}: {exc}", int(ExitCode.RUN_FAILED), host, False


def agree_or_raise(
    world: World, vote: tuple[str, int, str, bool] | None, what: str, cleanup: Callable[[], None] | None = None
) -> None:
    """Wait for every rank at ``what``; when any voted a failure, raise on every rank: rank 0 the
    failing rank's error (named by rank and host, with its exit code), the others FollowerExit."""
    try:
        votes = world.agree(vote, what, if_interrupted=failure_vote(KeyboardInterrupt()))
    except SyncTimeout as exc:
        if cleanup:
            cleanup()
        world.abort(ExitCode.RUN_FAILED, f"rank {world.rank}: {exc}")
        raise  # not reached: Abort ends the process
    failures = [(rank, v) for rank, v in enumerate(votes) if v is not None]
    if not failures:
        return
    if cleanup:
        cleanup()
    if not world.is_root:
        raise FollowerExit(failures[0][1][1], started=False)
    real = [(rank, v) for rank, v in failures if v[1] != ExitCode.INTERRUPTED]
    if not real:
        raise AgreedInterrupt(f"interrupted during {what}")
    rank, (message, code, host, _) = real[0]
    more = f" (and {len(real) - 1} more rank{'s' if len(real) > 2 else ''})" if len(real) > 1 else ""
    raise RankFailed(f"rank {rank} on {host}: {message}{more}", code, cannot_run_there=all(v[3] for _, v in real))


def build_on_rank(make: Callable[[], T], world: World) -> tuple[T | None, tuple[str, int, str, bool] | None]:
    """Build on this rank; a failure becomes this rank's vote, so that rank 0 reports it for everyone.
    Notes printed while building (a skipped path) come from rank 0 only."""
    quiet = contextlib.nullcontext() if world.is_root else contextlib.redirect_stderr(io.StringIO())
    try:
        with quiet:
            return make(), None
    except (XferscopeError, ValueError) as exc:
        return None, failure_vote(exc)


def same_on_every_rank(
    world: World, value: T, differs: Callable[[int, str, T, T], str], code: int, *, key: Callable[[T], object]
) -> None:
    """Every rank holds the same ``key(value)``, else every rank stops: rank 0 with ``differs(rank, host, theirs,
    rank 0's)`` naming the first that does not (exit ``code``), the others quietly."""
    rows = world.allgather((value, key(value), socket.gethostname()))
    for rank, (theirs, their_key, host) in enumerate(rows):
        if their_key != rows[0][1]:
            if world.is_root:
                raise RankFailed(differs(rank, host, theirs, rows[0][0]), code)
            raise FollowerExit(code, started=False)


class ClusterRun:
    """The steps of ``run_spec_mpi`` on one rank."""

    def __init__(self, world: World, spec: RunSpec | Callable[[], RunSpec], *, gpu_given: bool):
        self.world = world
        self.spec_source = spec
        self.gpu_given = gpu_given
        self.layout: Layout | None = None
        self.template: RunSpec | None = None
        self.run: EngineRun | None = None
        self._closed = False

    def _agree(self, vote, what: str) -> None:
        agree_or_raise(self.world, vote, what, cleanup=self.close)

    def close(self) -> None:
        """Free the engine and remove the files this rank created (once)."""
        if self.run is not None and not self._closed:
            self._closed = True
            try:
                self.run.close()
            except Exception:
                pass

    def close_in_turn(self) -> None:
        """Close with every rank present: the ranks that created files last, so that a shared
        scratch file is not removed while another rank still updates its sidecar."""
        created = bool(self.run and self.run.target and self.run.target.created)
        if not created:
            self.close()
        self.world.barrier()
        self.close()

    # ---------------------------------------------------------------- steps
    def setup(self) -> None:
        rows = self.world.agree(describe_me(), "the start")
        self.layout = layout_from(rows, self.world.rank)
        vote = None
        try:
            template = self.spec_source() if callable(self.spec_source) else self.spec_source
            self.template = template.validate()
            gpus_on_host = 0
            if template.uses_gpu and not self.gpu_given:
                from xferscope.gpus import gpu_count

                gpus_on_host = gpu_count()[0]
            self.run = EngineRun(rank_spec(template, self.layout, gpu_given=self.gpu_given, gpus_on_host=gpus_on_host))
        except (Exception, KeyboardInterrupt) as exc:
            vote = failure_vote(exc)
        self._agree(vote, "the spec check")

    def prepare(self, progress: Callable[[int, int], None] | None) -> None:
        for wave in prepare_waves(self.template, self.layout):
            vote = None
            if self.world.rank in wave:
                try:
                    self.run.prepare(progress if self.world.is_root else None)
                except (Exception, KeyboardInterrupt) as exc:
                    vote = failure_vote(exc)
            self._agree(vote, "the end of preparation")

    def timed_region(self, on_sample, on_interrupt) -> Leader | Follower:
        me = self.layout.mine
        maker = RecordMaker(self.world.rank, with_cores=me.local_rank == 0)
        self.run.subscribe(maker.on_sample)
        self.world.barrier()
        start_error = None
        try:
            self.run.start()
        except Exception as exc:
            start_error = failure_vote(exc)[0]
        if self.world.is_root:
            side = Leader(
                self.world,
                self.layout,
                self.run,
                maker,
                on_sample=on_sample,
                on_interrupt=on_interrupt,
                start_error=start_error,
            )
        else:
            side = Follower(self.world, self.run, maker, start_error=start_error)
        side.loop()
        return side

    def meta(self) -> ClusterFacts:
        """The job's launcher and MPI library, for the record's cluster facts."""
        return {"launcher": self.world.launcher, "mpi": self.world.library}


def run_spec_mpi(
    spec: RunSpec | Callable[[], RunSpec],
    *,
    gpu_given: bool = True,
    on_sample: Callable[[Sample, dict[str, Sample]], None] | None = None,
    on_partial: Callable[[RunResult], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult | None:
    """Run ``spec`` on every rank of the MPI job (call it on all ranks, with the same spec).

    ``spec`` may be a function that builds it, so that a rank's bad input is reported like any
    other rank failure. ``gpu_given``: False when the user named no GPU, so that each rank
    takes GPU ``local_rank % gpus_on_host``.

    Rank 0 returns the aggregate RunResult (per host in ``result.hosts``); it calls
    ``on_sample(aggregate_sample, {host: sample})`` each interval, ``on_partial(result)``
    with what was measured so far when interrupted (before it waits for the other
    ranks), and ``progress(done, total)`` while creating its scratch file. A failed run
    raises RunFailed with ``.result`` (as ``EngineRun.execute``); a failure before the timed
    region raises the failing rank's error, named by rank and host. Other ranks return
    None, or raise FollowerExit(code) when the run failed or was interrupted: they print
    nothing, rank 0 reports. Anything unexpected on one rank aborts the whole job rather
    than leave the others waiting.
    """
    world = open_world()
    try:
        code, result = _run_everywhere(world, spec, gpu_given, on_sample, on_partial, progress)
    except (RankFailed, FollowerExit, AgreedInterrupt):
        raise
    except BaseException as exc:
        message, code, *_ = failure_vote(exc)
        world.abort(code, f"rank {world.rank}: {message}")
        raise  # not reached: Abort ends the process
    if not world.is_root:
        if code:
            raise FollowerExit(code, started=True)
        return None
    if result.status == "failed":
        err = RunFailed(result.error or "a rank failed")
        err.result = result
        raise err
    return result


def _run_everywhere(world: World, spec, gpu_given, on_sample, on_partial, progress) -> tuple[int, RunResult | None]:
    job = ClusterRun(world, spec, gpu_given=gpu_given)
    job.setup()
    job.prepare(progress)

    def save_partial(live) -> None:
        if on_partial is not None:
            on_partial(cluster_result(job.template, live, job.meta()))

    result = None
    try:
        side = job.timed_region(on_sample, save_partial)
        if isinstance(side, Leader):
            result = cluster_result(job.template, side.live, job.meta())
            code = _exit_code(result)
            if side.lost_ranks:  # they cannot hear the outcome: end the job when this process is done
                world.abort_at_exit(code or ExitCode.RUN_FAILED)
                return code, result
            world.comm.bcast(code, root=0)
            side.finish_sends()
        else:
            code = world.comm.bcast(None, root=0)
            side.drain_stops()
        job.close_in_turn()
    finally:
        job.close()
    return code, result


def _exit_code(result: RunResult) -> int:
    if result.status == "failed":
        return int(ExitCode.RUN_FAILED)
    if result.status == "interrupted":
        return int(ExitCode.INTERRUPTED)
    return 0
