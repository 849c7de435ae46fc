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

What this package declares (``TRAIN_JOB``); the cluster's ``WorkloadRanks`` runs it as every workload's.

A rank whose engine process dies is marked failed in the job's record; the others' figures are kept and the
exit is non-zero. Ctrl-C on the launcher (its SIGTERM to the ranks) ends every rank's run with what it measured.
"""

from __future__ import annotations

import dataclasses

import msgspec

from xferscope.workloads.common.across_ranks import Ranks, RanksJob, rank_result
from xferscope.workloads.common.kind import RunProgress
from xferscope.workloads.train import train_data
from xferscope.workloads.train.find_max import find_max
from xferscope.workloads.train.options import TrainRequest
from xferscope.workloads.train.train import TrainSession, find_max_record, most_that_fit
from xferscope.workloads.train.train_cluster import cluster_result, lowest_host_au
from xferscope.workloads.train.train_record import AcceleratorRun, FindMaxResult, TrainResult
from xferscope.workloads.train.train_spec import TrainSpec


def _comparable(request: TrainRequest) -> tuple[str, bytes]:
    """What every rank must agree on: the spec less what is each rank's own (directory, GPUs)."""
    spec = request.spec
    return f"preset {spec.preset}", msgspec.json.encode(dataclasses.replace(spec, directory=None, gpus=(0,)))


def rank_share(spec: TrainSpec, ranks: Ranks, gpu_text: str | None, accelerators: int) -> TrainSpec:
    """This rank's spec for ``accelerators`` a rank: its directory, GPUs and accelerator numbers in the job."""
    return dataclasses.replace(
        spec,
        directory=ranks.own(spec.directory, "dir"),
        gpus=ranks.gpus(gpu_text, spec.uses_gpu, spec.gpus),
        accelerators=accelerators,
        world_accelerators=accelerators * ranks.size,
        first_accelerator=ranks.rank * accelerators,
    ).validate()


class TrainRankJob:
    """The steps of ``workload train --mpi`` on one rank: the data set placed, then one run or a --find-max
    search."""

    def __init__(self, ranks: Ranks, request: TrainRequest, progress: RunProgress):
        self.ranks, self.request, self.progress = ranks, request, progress
        self.session = TrainSession(request.spec)
        self.template = request.spec  # the command's spec: each run's is this rank's share of it (rank_share)
        ranks.cleanup = self.session.close

    def prepare(self) -> None:
        """Check on every rank; rank 0 makes the set, then the first rank of each host that cannot see it."""
        session = self.session
        session.spec = rank_share(self.template, self.ranks, self.request.gpu_text, self.template.accelerators)

        def check_and_make() -> None:
            session.check()
            if self.ranks.is_root and session.data is None:
                session.data = train_data.generate(session.spec, self.progress.fill, cancel=lambda: session.stopped)

        self.ranks.step("the data set", check_and_make)
        if session.spec.data is None:  # a generated set (the user's own files are read where they are)
            session.data = self.ranks.place_data(
                session.spec.directory,
                lambda: train_data.generate(session.spec, None, cancel=lambda: session.stopped),
                lambda root, direct: train_data.adopt(session.spec, root, direct),
                session.data if self.ranks.is_root else None,
            )

    def run_with(self, accelerators: int) -> TrainResult:
        """One run of ``accelerators`` a rank, every rank's timed region started together; the job's record
        (the same on every rank)."""
        ranks = self.ranks
        spec = rank_share(self.template, ranks, self.request.gpu_text, accelerators)

        def mine(got: tuple[TrainResult, list[AcceleratorRun]]):
            return rank_result(ranks, got[0], detail=got[1])

        everyone = ranks.together(
            lambda on_ready, _meet: self.session.run_with_steps(spec, self.progress.tick, on_ready=on_ready),
            mine,
            lambda got: got[0].status != "ok",
        )
        return cluster_result(self.session.spec, everyone, ranks.facts())

    def find_max(self, upper: int) -> FindMaxResult:
        """The most accelerators a rank that keep the AU threshold on every host: the same search on every
        rank, each step decided from the job's record, which every rank has."""
        spec, data = self.session.spec, self.session.data
        assert data is not None
        fit = min(self.ranks.allgather(most_that_fit(spec, data)))
        upper = min(upper, len(data.samples) // spec.batch // self.ranks.size, fit)

        stopped_runs: list[TrainResult] = []  # a run cut short: kept in the record, judged nothing

        def measure(n: int) -> tuple[float, TrainResult]:
            result = self.run_with(n)
            if result.status != "ok":  # the same on every rank: every rank's search stops here
                stopped_runs.append(result)
                raise KeyboardInterrupt
            return lowest_host_au(result), result

        return find_max_record(find_max(measure, spec.au_threshold, max(1, upper)), stopped_runs)

    def run(self) -> TrainResult | FindMaxResult:
        """The data set placed, then --find-max or one run."""
        self.prepare()
        request = self.request
        return self.find_max(request.upper) if request.find_max else self.run_with(self.template.accelerators)


def _status(result: TrainResult | FindMaxResult) -> str:
    if isinstance(result, FindMaxResult) and any(r.status == "failed" for r in result.results):
        return "failed"
    return result.status


TRAIN_JOB = RanksJob(_comparable, TrainRankJob, _status)
