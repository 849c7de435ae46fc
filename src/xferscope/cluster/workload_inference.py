"""``workload load --mpi`` and ``workload kvcache --mpi``: an inference workload run by every rank of an MPI job.

Started as ``mpirun -n N xferscope workload load|kvcache ... --mpi``. ``load``: every rank loads the model, its
own copy (``--share copy``) or its tensor-parallel share (``--share tp``: each tensor's rows split over every
rank's GPUs, as ``--gpu`` splits them on one host); the time to load is the slowest rank's. ``kvcache``: the job's
requests spread over the ranks (rank *i* of *N* makes requests *i*, *i + N*, ...), the restore times over every
request of every rank. The steps, on every rank (each an agreement: one rank's failure is every rank's, said
once by rank 0):

1. the spec: the same on every rank; each rank's directory (``--dir`` may hold ``{rank}``, ``{host}``) and GPU
   (``-d`` may hold ``{local_rank}``; without ``-d`` local rank *i* takes GPU *i* of its host);
2. the data (the shards, the cache), generated once: by rank 0, then by the first rank of each host that cannot
   see it, the others reading their host's (the user's ``--files`` or ``--cache`` are read where they are);
3. every rank's run started together (a load's request shape measured, and its page cache set, before);
4. every rank's record to all; rank 0 prints and writes the job's (``load_cluster``, ``kvcache_cluster``), with
   each host's and each rank's figures.

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
from xferscope.output.workload_inference import show_kvcache, show_load
from xferscope.target import memory_total
from xferscope.workloads.common.job_ranks import RankResult
from xferscope.workloads.inference import kvcache_data, load_data
from xferscope.workloads.inference.kvcache import KvSession
from xferscope.workloads.inference.kvcache_cluster import cluster_result as kv_cluster
from xferscope.workloads.inference.kvcache_spec import KvSpec
from xferscope.workloads.inference.load import LoadSession
from xferscope.workloads.inference.load_cluster import cluster_result as load_cluster
from xferscope.workloads.inference.load_spec import LoadSpec
from xferscope.workloads.inference.options import InferenceRequest

R = TypeVar("R")


class Session(Protocol[R]):
    """What an inference session gives a job across ranks (``LoadSession``, ``KvSession``)."""

    spec: Any

    def check(self) -> object: ...

    def generate(self, progress: Callable[[int, int], None] | None = None) -> Any: ...

    def run(self, spec: Any, on_tick: Any, on_ready: Callable[[], None] | None) -> R: ...

    def close(self) -> None: ...


def _comparable(spec: LoadSpec | KvSpec) -> tuple[str, bytes]:
    """What every rank must agree on: the spec less what is each rank's own (directory, GPUs, part)."""
    if isinstance(spec, LoadSpec):
        what = f"model {spec.model.name}" if spec.model is not None else f"files {spec.files}"
    else:
        what = f"model {spec.model.name}"
    return what, msgspec.json.encode(dataclasses.replace(spec, directory=None, gpus=(0,), part=(0, 1)))


class InferenceJob(Generic[R]):
    """The steps of an inference workload on one rank: its data placed, then its run started with every rank's.

    ``given``: the user's data (read where it is); ``placed(data)`` sets the session's data; ``adopt(root,
    direct)`` reads data another rank made; ``merge(every rank's)`` is the job's record."""

    def __init__(
        self,
        ranks: WorkloadRanks,
        session: Session[R],
        *,
        given: bool,
        placed: Callable[[DataSet], None],
        adopt: Callable[[str, bool], DataSet | None],
        merge: Callable[[list[RankResult[R]]], R],
        live: bool,
    ):
        self.ranks, self.session, self.given, self.live = ranks, session, given, live
        self.placed, self.adopt, self.merge = placed, adopt, merge
        ranks.cleanup = session.close

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
            return RankResult(ranks.world.rank, ranks.layout.mine.host, result, memory_total(), os.cpu_count() or 1)

        everyone = ranks.together(
            lambda on_ready, _meet: session.run(None, None, on_ready),
            mine,
            lambda result: getattr(result, "status", "ok") != "ok",
        )
        return self.merge(everyone)


def _rank_spec(spec: Any, ranks: WorkloadRanks, gpu_text: str | None, part: tuple[int, int]) -> Any:
    """This rank's spec: its directory and GPUs, and its part of the job."""
    return dataclasses.replace(
        spec,
        directory=expand(spec.directory, "dir", ranks.layout.mine),
        gpus=rank_gpus(gpu_text, True, spec.gpus, ranks.layout),
        part=part,
    ).validate()


def load_job(ranks: WorkloadRanks, request: InferenceRequest, live: bool) -> InferenceJob:
    me = (ranks.layout.mine.rank, ranks.layout.size)
    session = LoadSession(_rank_spec(request.spec, ranks, request.gpu_text, me if request.share == "tp" else (0, 1)))

    return InferenceJob(
        ranks,
        session,
        given=request.spec.files is not None,
        placed=lambda data: setattr(session, "shards", data),
        adopt=lambda root, direct: load_data.adopt(session.spec, root, direct),
        merge=lambda everyone: load_cluster(everyone, ranks.facts(), request.share),
        live=live,
    )


def kvcache_job(ranks: WorkloadRanks, request: InferenceRequest, live: bool) -> InferenceJob:
    session = KvSession(_rank_spec(request.spec, ranks, request.gpu_text, (ranks.layout.mine.rank, ranks.layout.size)))

    return InferenceJob(
        ranks,
        session,
        given=request.spec.cache is not None,
        placed=lambda data: setattr(session, "cache", data),
        adopt=lambda root, direct: kvcache_data.adopt(session.spec, root, direct),
        merge=lambda everyone: kv_cluster(everyone, ranks.facts()),
        live=live,
    )


def kvcache_mpi(make: Callable[[], InferenceRequest], **out: Any) -> None:
    """`workload kvcache --mpi`: every rank runs this; rank 0 prints and writes (``out``: fmt, json_path, csv_path),
    the others print nothing and exit with rank 0's code."""
    run_on_every_rank(make, _agreed, kvcache_job, lambda result: show_kvcache(result, **out), fmt=out["fmt"])


def load_mpi(make: Callable[[], InferenceRequest], **out: Any) -> None:
    """`workload load --mpi`, as ``kvcache_mpi``."""
    run_on_every_rank(make, _agreed, load_job, lambda result: show_load(result, **out), fmt=out["fmt"])


def _agreed(request: InferenceRequest) -> tuple[str, bytes]:
    return _comparable(request.spec)
