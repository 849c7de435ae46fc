"""Every workload across the ranks of an MPI job (``workload NAME --mpi``), its job as its package declares it
(``workloads.common.across_ranks.RanksJob``): the same spec on every rank, a data set made once per host or once in
all, timed regions started together, and every rank's outcome handed to all; rank 0 prints and writes the job's
record as every workload's is (``output.workload_run``).

Each step is an agreement (``session.agree_or_raise``): one rank's failure is every rank's, said once by rank 0
with the rank and host, and the rank's files are removed first (``cleanup``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn, TypeVar

import typer

from xferscope.cluster.layout import Layout, describe_me, expand, layout_from
from xferscope.cluster.session import (
    AgreedInterrupt,
    FollowerExit,
    RankFailed,
    agree_or_raise,
    build_on_rank,
    failure_vote,
    same_on_every_rank,
)
from xferscope.cluster.world import TAG_HALT, World, launcher, open_world
from xferscope.errors import EnvironmentProblem, ExitCode, SpecError
from xferscope.gpus import gpu_count
from xferscope.output.terminal import clear_line
from xferscope.output.workload_run import live_progress, show_workload
from xferscope.spec import parse_int_list
from xferscope.workloads.common.across_ranks import D, RankJob, RanksJob
from xferscope.workloads.common.job_ranks import JobFacts
from xferscope.workloads.common.process_run import close_interrupted_later, join_closing, stop_when

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")


class _Ended(NamedTuple):
    """What a rank whose run has ended says at each meeting of the ranks still running, and at the last."""

    cut_short: bool  # failed or interrupted: the ranks still running stop at their next meeting
    outcome: Any


#: what a running rank interrupted (Ctrl-C, the launcher's SIGTERM) says at a meeting; a running rank says None
_INTERRUPTED = "interrupted"


def check_launcher() -> None:
    """``--mpi`` needs ranks: one line (exit 3) when no MPI launcher started this process."""
    if launcher() == "none":
        raise EnvironmentProblem(
            "--mpi: no MPI launcher started this process; start it as mpirun -n N xferscope workload ... --mpi "
            "(or with srun)"
        )


def rank_gpus(gpu_text: str | None, uses_gpu: bool, given: tuple[int, ...], layout: Layout) -> tuple[int, ...]:
    """This rank's GPUs: ``-d`` with ``{local_rank}`` filled in; without ``-d``, local rank *i* takes GPU *i* of its
    host (modulo the host's GPUs); ``given`` where the run uses no GPU."""

    if gpu_text is not None:
        return tuple(parse_int_list(str(expand(gpu_text, "gpu", layout.mine)), "gpu"))
    if uses_gpu:
        n = gpu_count()[0]
        return (layout.mine.local_rank % n,) if n else given
    return given


def exit_code(status: str) -> int:
    if status == "failed":
        return int(ExitCode.RUN_FAILED)
    return int(ExitCode.INTERRUPTED) if status == "interrupted" else 0


class WorkloadRanks:
    """This rank's place in the job and the steps every workload kind takes across the ranks (what a workload's job
    is given: ``workloads.common.across_ranks.Ranks``)."""

    def __init__(self, world: World, layout: Layout, cleanup: Callable[[], None]):
        self.world, self.layout, self.cleanup = world, layout, cleanup
        self.data_per_host = False  # set by place_data: each host (or directory) made a set of its own

    @classmethod
    def open(cls, make_spec: Callable[[], S], comparable: Callable[[S], tuple[str, bytes]]) -> tuple[WorkloadRanks, S]:
        """The ranks of this job and the spec, built on every rank (a failure is reported by rank 0) and the
        same on every rank: ``comparable(spec)`` is (what to name, what must match); the first rank that differs
        stops every rank with one line from rank 0."""
        world = open_world()
        spec, vote = build_on_rank(make_spec, world)
        agree_or_raise(world, vote, "the spec check")
        assert spec is not None

        def differs(rank: int, host: str, theirs: tuple[str, bytes], first: tuple[str, bytes]) -> str:
            what = f"{theirs[0]} but rank 0 runs {first[0]}" if theirs[0] != first[0] else "other options than rank 0"
            return f"rank {rank} on {host} runs {what}: every rank must run the same command"

        same_on_every_rank(world, comparable(spec), differs, ExitCode.USAGE, key=lambda named: named[1])
        layout = layout_from(world.agree(describe_me(), "the start"), world.rank)
        return cls(world, layout, cleanup=lambda: None), spec

    @property
    def is_root(self) -> bool:
        return self.world.is_root

    @property
    def rank(self) -> int:
        return self.world.rank

    @property
    def size(self) -> int:
        return self.layout.size

    @property
    def host(self) -> str:
        return self.layout.mine.host

    @property
    def hosts(self) -> int:
        return len(self.layout.hosts)

    def allgather(self, mine: T) -> list[T]:
        return self.world.allgather(mine)

    def own(self, text: str | None, field: str) -> str | None:
        return expand(text, field, self.layout.mine)

    def gpus(self, gpu_text: str | None, uses_gpu: bool, given: tuple[int, ...]) -> tuple[int, ...]:
        return rank_gpus(gpu_text, uses_gpu, given, self.layout)

    def facts(self) -> JobFacts:
        """How this job runs, for its record."""
        return JobFacts(self.world.launcher, self.world.library, self.data_per_host)

    def agree(self, vote, what: str) -> None:
        agree_or_raise(self.world, vote, what, cleanup=self.cleanup)

    def step(self, what: str, work: Callable[[], object], *, here: bool = True) -> None:
        """``work`` on this rank (where ``here``), then every rank agrees that it went well."""
        vote = None
        if here:
            try:
                work()
            except (Exception, KeyboardInterrupt) as exc:
                vote = failure_vote(exc)
        self.agree(vote, what)

    def place_data(
        self,
        directory: str | None,
        make: Callable[[], D],
        adopt: Callable[[str, bool], D | None],
        made_here: D | None,
    ) -> D:
        """The data set this rank reads, made once: ``made_here`` is rank 0's (made in the step before); a rank
        with the same ``directory`` that sees it whole (``adopt``) reads it; of the others, the first rank of each
        host and directory makes one (``make``) and the rest of them read that."""
        world = self.world
        made = world.bcast((made_here.root, made_here.direct, directory) if made_here else None)
        mine: D | None = made_here
        if not world.is_root and directory == made[2]:
            mine = adopt(made[0], made[1])
        rows = world.allgather((mine is not None, self.layout.mine.host, directory))
        makers: dict[tuple[str, str | None], int] = {}  # the first rank of a host and directory without a set
        for rank, (has, host, where) in enumerate(rows):
            if not has:
                makers.setdefault((host, where), rank)
        self.data_per_host = bool(makers)
        maker = makers.get((self.layout.mine.host, directory))

        def make_mine() -> None:
            nonlocal mine
            mine = make()

        self.step("the data sets of the hosts", make_mine, here=maker == world.rank)
        sets = world.allgather((mine.root, mine.direct) if mine is not None and maker == world.rank else None)

        def read_makers() -> None:
            nonlocal mine
            assert maker is not None
            root, direct = sets[maker]
            mine = adopt(root, direct)
            if mine is None:
                raise SpecError("dir", f"cannot read the data set rank {maker} made in {root}")

        self.step("the data set", read_makers, here=mine is None)
        assert mine is not None
        return mine

    def together(
        self,
        run: Callable[[Callable[[], None], Callable[[str], bool]], T],
        outcome: Callable[[T], S],
        cut_short: Callable[[T], bool] = lambda _: False,
        *,
        stop_at_word: bool = True,
    ) -> list[S]:
        """``run(on_ready, meet)`` on this rank, every rank's timed region started when all are ready (``on_ready``
        is where the run's process is set up); then every rank's ``outcome`` of it, in rank order, on every rank.

        ``meet(what)`` is a meeting mid-run (a checkpoint's start): this rank waits there for every rank still
        running; False (stop the run) once a rank's run was ``cut_short`` (failed, or interrupted) or a rank was
        interrupted at the meeting. A rank whose run has ended answers the meetings of the others until every run
        has ended, so a rank that fails early does not leave the others waiting.

        A rank whose run was cut short tells every other rank at once; a rank still running stops at the word
        (within ``process_run.QUIET_S``), what it measured kept, instead of running to its end; without
        ``stop_at_word`` (a run that meets: it stops at its next meeting) the words are only collected."""

        def halted() -> str | None:
            word = self.world.heard(TAG_HALT)
            return None if word is None else f"stopped: rank {word[0]} on {word[1]} ended early"

        def meet(what: str) -> bool:
            said = self.world.agree(None, what, if_interrupted=_INTERRUPTED)
            if self.world.interrupt_pending:  # Ctrl-C during the exchange: this rank stops here
                return False
            return not any(s == _INTERRUPTED or (isinstance(s, _Ended) and s.cut_short) for s in said)

        try:
            with stop_when(halted) if stop_at_word else contextlib.nullcontext():
                got = run(lambda: self.agree(None, "the start of the run"), meet)
        except (RankFailed, FollowerExit, AgreedInterrupt):
            raise
        except (Exception, KeyboardInterrupt) as exc:  # this rank could not start: the others wait at the start
            self.agree(failure_vote(exc), "the start of the run")
            raise
        mine = _Ended(cut_short(got), outcome(got))
        me = self.world.rank
        sent = self.world.tell_others(TAG_HALT, (me, self.layout.mine.host)) if mine.cut_short else []
        while True:  # the others' meetings answered until every run has ended
            said = self.world.agree(mine, "the end of the run")
            if all(isinstance(s, _Ended) for s in said):
                self.world.settle(TAG_HALT, [r for r, s in enumerate(said) if s.cut_short and r != me], sent)
                return [s.outcome for s in said]

    def close(self) -> None:
        """Every rank done reading, then this rank removes what it made."""
        try:
            self.world.agree(None, "the end")
        finally:
            self.cleanup()


def run_on_every_rank(
    make_spec: Callable[[], S],
    comparable: Callable[[S], tuple[str, bytes]],
    job_of: Callable[[WorkloadRanks, S, bool], RankJob[R]],
    emit: Callable[[R], int],
    *,
    fmt: str,
    status_of: Callable[[R], str] = lambda r: getattr(r, "status", "ok"),
) -> NoReturn:
    """A workload across the ranks: every rank opens the job (``make_spec``, the same everywhere), runs its part
    (``job_of(ranks, spec, live)``: live is where rank 0 shows progress) and exits with rank 0's code; rank 0 alone
    prints and writes the job's record (``emit``, its code where it could not write) and says how it ended."""
    written = 0
    try:
        ranks, spec = WorkloadRanks.open(make_spec, comparable)
        close_interrupted_later()  # after Ctrl-C, the record before the engine processes' close
        live = ranks.is_root and fmt != "json" and os.isatty(2)
        try:
            result = job_of(ranks, spec, live).run()
            clear_line(live)
            if ranks.is_root:  # the record first: after Ctrl-C the launcher gives the ranks little time
                written = emit(result)
        finally:
            ranks.close()
            join_closing()
    except FollowerExit as exc:
        raise typer.Exit(exc.code) from None
    code = exit_code(status_of(result))
    if not ranks.is_root:
        raise typer.Exit(code)
    if code == ExitCode.RUN_FAILED:
        typer.echo(f"xferscope: {getattr(result, 'error', None) or 'a rank failed'}", err=True)
    elif code == ExitCode.INTERRUPTED:
        typer.echo("xferscope: interrupted; what every rank measured is above", err=True)
    raise typer.Exit(code or written)


def run_workload_job(make: Callable[[], Any], declared: RanksJob, kind: Any, **out: Any) -> NoReturn:
    """A workload's job as its package declares it, run by every rank (``out``: fmt, json_path, csv_path); rank 0
    shows its progress live and prints and writes the job's record (``kind``: the workload's ``WorkloadKind``)."""

    def job_of(ranks: WorkloadRanks, request: Any, live: bool) -> RankJob:
        return declared.job(ranks, request, live_progress(kind, live, f"rank 0 of {ranks.size}: "))

    run_on_every_rank(
        make,
        declared.comparable,
        job_of,
        lambda result: show_workload(kind, result, **out),
        fmt=out["fmt"],
        status_of=declared.status_of,
    )
