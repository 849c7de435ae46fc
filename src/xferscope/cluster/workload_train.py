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
from collections.abc import Callable

import msgspec

from xferscope.cluster.layout import Layout, expand
from xferscope.cluster.workload_ranks import WorkloadRanks, rank_gpus, run_on_every_rank
from xferscope.output.terminal import clear_line, fill_line
from xferscope.output.workload_run import live_progress, show_workload
from xferscope.target import memory_total
from xferscope.workloads.train import train_data
from xferscope.workloads.train.accelerators import TrainTick
from xferscope.workloads.train.find_max import find_max
from xferscope.workloads.train.kind import TRAIN
from xferscope.workloads.train.options import TrainRequest
from xferscope.workloads.train.train import TrainSession, find_max_record, most_that_fit
from xferscope.workloads.train.train_cluster import TrainRank, cluster_result, lowest_host_au
from xferscope.workloads.train.train_record import AcceleratorRun, FindMaxResult, TrainResult
from xferscope.workloads.train.train_spec import TrainSpec


def _comparable(spec: TrainSpec) -> tuple[str, bytes]:
    """What every rank must agree on: the spec less what is each rank's own (directory, GPUs)."""
    return f"preset {spec.preset}", msgspec.json.encode(dataclasses.replace(spec, directory=None, gpus=(0,)))


def rank_spec(spec: TrainSpec, layout: Layout, gpu_text: str | None, accelerators: int) -> TrainSpec:
    """This rank's spec for ``accelerators`` a rank: its directory, GPUs and accelerator numbers in the job."""
    return dataclasses.replace(
        spec,
        directory=expand(spec.directory, "dir", layout.mine),
        gpus=rank_gpus(gpu_text, spec.uses_gpu, spec.gpus, layout),
        accelerators=accelerators,
        world_accelerators=accelerators * layout.size,
        first_accelerator=layout.mine.rank * accelerators,
    ).validate()


class TrainRankJob:
    """The steps of ``workload train --mpi`` on one rank."""

    def __init__(
        self,
        ranks: WorkloadRanks,
        session: TrainSession,
        gpu_text: str | None,
        on_tick: Callable[[TrainTick], None] | None = None,
    ):
        self.ranks, self.session, self.gpu_text, self.on_tick = ranks, session, gpu_text, on_tick
        self.template = session.spec  # the command's spec: each run's is this rank's share of it (rank_spec)
        ranks.cleanup = session.close

    def prepare(self, progress: Callable[[int, int], None] | None) -> None:
        """Check on every rank; rank 0 makes the set, then the first rank of each host that cannot see it."""
        session = self.session
        session.spec = rank_spec(self.template, self.ranks.layout, self.gpu_text, self.template.accelerators)

        def check_and_make() -> None:
            session.check()
            if self.ranks.is_root and session.data is None:
                session.data = train_data.generate(session.spec, progress, cancel=lambda: session.stopped)

        self.ranks.step("the data set", check_and_make)
        if session.spec.data is None:  # a generated set (the user's own files are read where they are)
            session.data = self.ranks.place_data(
                session.spec.directory,
                lambda: train_data.generate(session.spec, None, cancel=lambda: session.stopped),
                lambda root, direct: train_data.adopt(session.spec, root, direct),
                session.data if self.ranks.is_root else None,
            )

    def run(self, accelerators: int) -> TrainResult:
        """One run of ``accelerators`` a rank, every rank's timed region started together; the job's record
        (the same on every rank)."""
        ranks = self.ranks
        spec = rank_spec(self.template, ranks.layout, self.gpu_text, accelerators)

        def mine(got: tuple[TrainResult, list[AcceleratorRun]]) -> TrainRank:
            memory, cpus = memory_total(), os.cpu_count()
            result, runs = got
            return TrainRank(ranks.world.rank, ranks.layout.mine.host, result, memory, cpus, detail=runs)

        everyone = ranks.together(
            lambda on_ready, _meet: self.session.run_with_steps(spec, self.on_tick, on_ready=on_ready),
            mine,
            lambda got: got[0].status != "ok",
        )
        return cluster_result(self.session.spec, everyone, ranks.facts())

    def find_max(self, upper: int) -> FindMaxResult:
        """The most accelerators a rank that keep the AU threshold on every host: the same search on every
        rank, each step decided from the job's record, which every rank has."""
        spec, data = self.session.spec, self.session.data
        assert data is not None
        fit = min(self.ranks.world.allgather(most_that_fit(spec, data)))
        upper = min(upper, len(data.samples) // spec.batch // self.ranks.layout.size, fit)

        stopped_runs: list[TrainResult] = []  # a run cut short: kept in the record, judged nothing

        def measure(n: int) -> tuple[float, TrainResult]:
            result = self.run(n)
            if result.status != "ok":  # the same on every rank: every rank's search stops here
                stopped_runs.append(result)
                raise KeyboardInterrupt
            return lowest_host_au(result), result

        return find_max_record(find_max(measure, spec.au_threshold, max(1, upper)), stopped_runs)


class _Search:
    """``--find-max`` (or one run) after the data set is placed: what ``run_on_every_rank`` runs."""

    def __init__(self, job: TrainRankJob, find_max: bool, upper: int, live: bool):
        self.job, self.find_max, self.upper, self.live = job, find_max, upper, live

    def run(self) -> TrainResult | FindMaxResult:

        self.job.prepare(fill_line if self.live else None)
        clear_line(self.live)
        return self.job.find_max(self.upper) if self.find_max else self.job.run(self.job.template.accelerators)


def _status(result: TrainResult | FindMaxResult) -> str:
    if isinstance(result, FindMaxResult) and any(r.status == "failed" for r in result.results):
        return "failed"
    return result.status


def train_mpi(make: Callable[[], TrainRequest], *, fmt: str, json_path: str | None, csv_path: str | None) -> None:
    """Every rank runs this; rank 0 prints and writes, the others print nothing and exit with rank 0's code."""

    def job_of(ranks: WorkloadRanks, request: TrainRequest, live: bool) -> _Search:
        ticks = live_progress(TRAIN, live, f"rank 0 of {ranks.layout.size}: ").tick
        job = TrainRankJob(ranks, TrainSession(request.spec), request.gpu_text, ticks)
        return _Search(job, request.find_max, request.upper, live)

    def emit(result: TrainResult | FindMaxResult) -> int:
        return show_workload(TRAIN, result, fmt=fmt, json_path=json_path, csv_path=csv_path)

    run_on_every_rank(make, lambda request: _comparable(request.spec), job_of, emit, fmt=fmt, status_of=_status)
