"""A workload whose ranks read a data set made for them, run by every rank of an MPI job (``workload kvcache --mpi``,
``workload load --mpi``: what each declares, ``workloads.common.job_ranks.DataSetJob``, in its package).

Started as ``mpirun -n N xferscope workload NAME ... --mpi``. The steps, on every rank (each an agreement: one
rank's failure is every rank's, said once by rank 0):

1. the spec: the same on every rank; each rank's directory (``--dir`` may hold ``{rank}``, ``{host}``), GPU
   (``-d`` may hold ``{local_rank}``; without ``-d`` local rank *i* takes GPU *i* of its host) and part of the job;
2. the data (the shards, the cache), generated once: by rank 0, then by the first rank of each host that cannot
   see it, the others reading their host's (the user's own data is read where it is);
3. every rank's run started together (a load's request shape measured, and its page cache set, before);
4. every rank's record to all; rank 0 prints and writes the job's (the workload's ``merge``), with each host's and
   each rank's figures.

A rank whose engine process dies is marked failed, the others' figures kept, and the exit is non-zero; Ctrl-C
on the launcher keeps what every rank measured; the data's makers remove it once every rank is done.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from xferscope.cluster.layout import expand
from xferscope.cluster.workload_ranks import DataSet, WorkloadRanks, rank_gpus, run_on_every_rank
from xferscope.output.terminal import clear_line, fill_line
from xferscope.target import memory_total
from xferscope.workloads.common.job_ranks import DataSetJob, RankResult

R = TypeVar("R")


class Session(Protocol[R]):
    """What a data-set workload's session gives its job across ranks (``KvSession``, ``LoadSession``)."""

    spec: Any

    def check(self) -> object: ...

    def generate(self, progress: Callable[[int, int], None] | None = None) -> Any: ...

    def run(self, spec: Any, on_tick: Any, on_ready: Callable[[], None] | None) -> R: ...

    def close(self) -> None: ...


def _comparable(job: DataSetJob, spec: Any) -> tuple[str, bytes]:
    """What every rank must agree on: the spec less what is each rank's own (directory, GPUs, part)."""
    return job.named(spec), msgspec.json.encode(dataclasses.replace(spec, directory=None, gpus=(0,), part=(0, 1)))


class DataSetRankJob(Generic[R]):
    """The steps of a data-set workload on one rank: its data placed, then its run started with every rank's.
    ``request``: what the command made (its ``spec`` and ``gpu_text``: ``-d`` as given)."""

    def __init__(self, ranks: WorkloadRanks, job: DataSetJob, request: Any, live: bool):
        me = ranks.layout.mine
        spec = dataclasses.replace(
            request.spec,
            directory=expand(request.spec.directory, "dir", me),
            gpus=rank_gpus(request.gpu_text, True, request.spec.gpus, ranks.layout),
            part=job.part(request, me.rank, ranks.layout.size),
        ).validate()
        self.ranks, self.job, self.request, self.live = ranks, job, request, live
        self.session: Session[R] = job.session(spec)
        self.given = job.given(spec)
        ranks.cleanup = self.session.close

    def placed(self, data: DataSet) -> None:
        setattr(self.session, self.job.data, data)

    def adopt(self, root: str, direct: bool) -> DataSet | None:
        return self.job.adopt(self.session.spec, root, direct)

    def merge(self, everyone: list[RankResult[R]]) -> R:
        return self.job.merge(everyone, self.ranks.facts(), self.request)

    def run(self) -> R:

        ranks, session = self.ranks, self.session
        made: list[DataSet] = []

        def check_and_make() -> None:
            session.check()
            if ranks.is_root and not self.given:
                made.append(session.generate(fill_line if self.live else None))

        ranks.step("the data", check_and_make)
        clear_line(self.live)
        if not self.given:
            self.placed(
                ranks.place_data(
                    session.spec.directory, lambda: session.generate(None), self.adopt, made[0] if made else None
                )
            )

        def mine(result: R) -> RankResult[R]:
            return RankResult(ranks.world.rank, ranks.layout.mine.host, result, memory_total(), os.cpu_count())

        everyone = ranks.together(
            lambda on_ready, _meet: session.run(None, None, on_ready),
            mine,
            lambda result: getattr(result, "status", "ok") != "ok",
        )
        return self.merge(everyone)


def run_data_set_job(make: Callable[[], Any], job: DataSetJob, show: Callable[..., int], **out: Any) -> None:
    """Every rank runs this; rank 0 prints and writes (``show``; ``out``: fmt, json_path, csv_path), the others print
    nothing and exit with rank 0's code."""
    run_on_every_rank(
        make,
        lambda request: _comparable(job, request.spec),
        lambda ranks, request, live: DataSetRankJob(ranks, job, request, live),
        lambda result: show(result, **out),
        fmt=out["fmt"],
    )
