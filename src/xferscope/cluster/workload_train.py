"""``workload train --mpi``: DLIO's training input across the ranks of an MPI job, as MLPerf Storage runs it.

Started as ``mpirun -n N xferscope workload train PRESET --mpi ...``. Every rank emulates its ``-a``
accelerators; the data set is sharded over the accelerators of every rank, by their number in the job, as DLIO
shards by global rank. The steps, on every rank (each an agreement: one rank's failure is every rank's, said
once by rank 0):

1. the spec: the same on every rank (a rank that would run another preset, or other options, stops them all);
   each rank's directory (``--dir`` may hold ``{rank}``, ``{host}``), GPU (``-d`` may hold ``{local_rank}``;
   without ``-d`` local rank *i* takes GPU *i* of its host) and accelerator numbers;
2. the data set, generated once: by rank 0, then by the first rank of each host that cannot see that one (a
   local disk, or a directory of its own), the others reading the set their host's first rank made; the maker
   removes it at the end, once every rank is done;
3. each rank's engine process set up, then the timed regions started together;
4. at the end every rank hands its record and its accelerators' steps to all (``--find-max`` decides the same
   next count on every rank from them), and rank 0 prints and writes the job's record: every accelerator
   together, each rank and each host beside it (``train_cluster``).

A rank whose engine process dies is marked failed in the job's record; the others' figures are kept and the
exit is non-zero. Ctrl-C on the launcher (its SIGTERM to the ranks) ends every rank's run with what it measured.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Callable

import msgspec
import typer

from xferscope.cluster.layout import Layout, describe_me, expand, layout_from
from xferscope.cluster.session import (
    AgreedInterrupt,
    FollowerExit,
    RankFailed,
    agree_or_raise,
    build_on_rank,
    failure_vote,
)
from xferscope.cluster.world import World, launcher, open_world
from xferscope.errors import EnvironmentProblem, ExitCode, SpecError
from xferscope.workloads.train import train_data
from xferscope.workloads.train.find_max import find_max
from xferscope.workloads.train.train import TrainSession, find_max_record, most_that_fit
from xferscope.workloads.train.train_cluster import JobFacts, RankRun, cluster_result, lowest_host_au
from xferscope.workloads.train.train_record import FindMaxResult, TrainResult
from xferscope.workloads.train.train_spec import TrainSpec


def check_launcher() -> None:
    """``--mpi`` needs ranks: one line (exit 3) when no MPI launcher started this process."""
    if launcher() == "none":
        raise EnvironmentProblem(
            "--mpi: no MPI launcher started this process; start it as mpirun -n N xferscope workload ... --mpi "
            "(or with srun)"
        )


def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def _comparable(spec: TrainSpec) -> bytes:
    """What every rank must agree on: the spec less what is each rank's own (directory, GPUs)."""
    return msgspec.json.encode(dataclasses.replace(spec, directory=None, gpus=(0,)))


def _same_spec(world: World, spec: TrainSpec) -> None:
    """Every rank runs the same preset and options; else one line from rank 0 naming the first that does not."""
    rows = world.comm.allgather((spec.preset, _comparable(spec), socket.gethostname()))
    for rank, (preset, comparable, host) in enumerate(rows):
        if comparable == rows[0][1]:
            continue
        what = f"preset {preset} but rank 0 runs {rows[0][0]}" if preset != rows[0][0] else "other options than rank 0"
        if world.is_root:
            raise RankFailed(f"rank {rank} on {host} runs {what}: every rank must run the same command", 2)
        raise FollowerExit(2, started=False)


def rank_spec(spec: TrainSpec, layout: Layout, gpu_text: str | None, accelerators: int) -> TrainSpec:
    """This rank's spec for ``accelerators`` a rank: its directory, GPUs and accelerator numbers in the job."""
    from xferscope.gpus import gpu_count
    from xferscope.spec import parse_int_list

    me = layout.mine
    if gpu_text is not None:
        gpus = tuple(parse_int_list(str(expand(gpu_text, "gpu", me)), "gpu"))
    elif spec.uses_gpu:
        n = gpu_count()[0]
        gpus = (me.local_rank % n,) if n else spec.gpus
    else:
        gpus = spec.gpus
    return dataclasses.replace(
        spec,
        directory=expand(spec.directory, "dir", me),
        gpus=gpus,
        accelerators=accelerators,
        world_accelerators=accelerators * layout.size,
        first_accelerator=me.rank * accelerators,
    ).validate()


class TrainJob:
    """The steps of ``workload train --mpi`` on one rank."""

    def __init__(self, world: World, layout: Layout, session: TrainSession, gpu_text: str | None):
        self.world, self.layout, self.session, self.gpu_text = world, layout, session, gpu_text
        self.facts = JobFacts(world.launcher, world.library, data_per_host=False)

    def _agree(self, vote, what: str) -> None:
        agree_or_raise(self.world, vote, what, cleanup=self.session.close)

    # ---------------------------------------------------------------- the data set
    def prepare(self, progress: Callable[[int, int], None] | None) -> None:
        """Check on every rank; rank 0 makes the set, then the first rank of each host that cannot see it."""
        world, session = self.world, self.session
        vote = None
        try:
            session.check()
            if world.is_root and session.data is None:
                session.data = train_data.generate(session.spec, progress, cancel=lambda: session.stopped)
        except (Exception, KeyboardInterrupt) as exc:
            vote = failure_vote(exc)
        self._agree(vote, "the data set")
        if session.spec.data is not None:  # the user's own files, read where they are on each host
            return
        made = world.comm.bcast(self._made() if world.is_root else None, root=0)
        mine = session.spec.directory
        adopted = world.is_root or (mine == made[2] and self._adopt(made[0], made[1]))
        rows = world.comm.allgather((adopted, self.layout.mine.host, mine))
        makers = {}  # (host, directory) -> the first rank there that could not see rank 0's set
        for rank, (ok, host, directory) in enumerate(rows):
            if not ok:
                makers.setdefault((host, directory), rank)
        self.facts = self.facts._replace(data_per_host=bool(makers))
        key = (self.layout.mine.host, mine)
        vote = None
        if not adopted and makers[key] == world.rank:
            try:
                session.data = train_data.generate(session.spec, None, cancel=lambda: session.stopped)
            except (Exception, KeyboardInterrupt) as exc:
                vote = failure_vote(exc)
        self._agree(vote, "the data sets of the hosts")
        sets = world.comm.allgather(self._made() if session.data is not None and not adopted else None)
        vote = None
        if not adopted and makers[key] != world.rank:
            root, direct, _ = sets[makers[key]]
            if not self._adopt(root, direct):
                vote = failure_vote(SpecError("dir", f"cannot read the data set rank {makers[key]} made in {root}"))
        self._agree(vote, "the data set")

    def _made(self) -> tuple[str, bool, str | None]:
        data = self.session.data
        assert data is not None
        return data.root, data.direct, self.session.spec.directory

    def _adopt(self, root: str, direct: bool) -> bool:
        data = train_data.adopt(self.session.spec, root, direct)
        if data is not None:
            self.session.data = data
        return data is not None

    # ---------------------------------------------------------------- runs
    def run(self, accelerators: int) -> TrainResult:
        """One run of ``accelerators`` a rank, every rank's timed region started together; the job's record
        (the same on every rank)."""
        world = self.world
        spec = rank_spec(self.session.spec, self.layout, self.gpu_text, accelerators)
        try:
            result, runs = self.session.run_with_steps(spec, on_ready=lambda: self._agree(None, "the start of the run"))
        except (RankFailed, FollowerExit, AgreedInterrupt):
            raise
        except (Exception, KeyboardInterrupt) as exc:  # this rank could not start: the others wait at the start
            self._agree(failure_vote(exc), "the start of the run")
            raise
        me = RankRun(world.rank, self.layout.mine.host, result, runs, _host_memory(), os.cpu_count() or 1)
        everyone = world.agree(me, "the end of the run")
        return cluster_result(self.session.spec, everyone, self.facts)

    def find_max(self, upper: int) -> FindMaxResult:
        """The most accelerators a rank that keep the AU threshold on every host: the same search on every
        rank, each step decided from the job's record, which every rank has."""
        spec, data = self.session.spec, self.session.data
        assert data is not None
        fit = min(self.world.comm.allgather(most_that_fit(spec, data)))
        upper = min(upper, len(data.samples) // spec.batch // self.layout.size, fit)

        stopped_runs: list[TrainResult] = []  # a run cut short: kept in the record, judged nothing

        def measure(n: int) -> tuple[float, TrainResult]:
            result = self.run(n)
            if result.status != "ok":  # the same on every rank: every rank's search stops here
                stopped_runs.append(result)
                raise KeyboardInterrupt
            return lowest_host_au(result), result

        return find_max_record(find_max(measure, spec.au_threshold, max(1, upper)), stopped_runs)

    def close(self) -> None:
        """Every rank done reading, then each maker removes its set."""
        try:
            self.world.agree(None, "the end")
        finally:
            self.session.close()


def train_mpi(
    make_spec: Callable[[], TrainSpec],
    *,
    gpu_text: str | None,
    find_max: bool,
    upper: int,
    fmt: str,
    json_path: str | None,
    csv_path: str | None,
) -> None:
    """Every rank runs this; rank 0 prints and writes, the others print nothing and exit with rank 0's code."""
    from xferscope.output.terminal import clear_line, fill_line
    from xferscope.output.workload import emit_train, find_max_mpi_lines

    world = open_world()
    root = world.is_root
    spec, vote = build_on_rank(make_spec, world)
    live = root and fmt != "json" and os.isatty(2)
    try:
        agree_or_raise(world, vote, "the spec check")
        assert spec is not None
        _same_spec(world, spec)
        layout = layout_from(world.agree(describe_me(), "the start"), world.rank)
        session = TrainSession(spec)
        job = TrainJob(world, layout, session, gpu_text)
        try:
            job.prepare(fill_line if live else None)
            clear_line(live)
            result: TrainResult | FindMaxResult = job.find_max(upper) if find_max else job.run(spec.accelerators)
        finally:
            job.close()
    except FollowerExit as exc:
        raise typer.Exit(exc.code) from None
    code = _exit_code(result)
    if not root:
        raise typer.Exit(code)
    lines = find_max_mpi_lines(result, layout.size) if isinstance(result, FindMaxResult) else None
    written = emit_train(result, fmt=fmt, json_path=json_path, csv_path=csv_path, lines=lines)
    if code == ExitCode.RUN_FAILED:
        typer.echo(f"xferscope: {getattr(result, 'error', None) or 'a rank failed'}", err=True)
    elif code == ExitCode.INTERRUPTED:
        typer.echo("xferscope: interrupted; what every rank measured is above", err=True)
    raise typer.Exit(code or written)


def _exit_code(result: TrainResult | FindMaxResult) -> int:
    if isinstance(result, FindMaxResult):
        failed = any(r.status == "failed" for r in result.results)
        return int(ExitCode.RUN_FAILED) if failed else int(ExitCode.INTERRUPTED) if result.status != "ok" else 0
    if result.status == "failed":
        return int(ExitCode.RUN_FAILED)
    return int(ExitCode.INTERRUPTED) if result.status == "interrupted" else 0
