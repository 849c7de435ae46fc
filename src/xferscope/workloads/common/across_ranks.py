"""A workload across the ranks of an MPI job (``--mpi``), as its package declares it (``RanksJob``): what every rank
must agree on, and its steps on one rank, given the rank's place in the job and the steps the ranks take together
(``Ranks``: the cluster's ``WorkloadRanks``, which runs every declared job alike). A workload whose ranks read a data
set made for them (kvcache, load) declares less (``DataSetJob``): its job's steps are the same for every such
workload (``DataSetRankJob``).

The steps of a data-set workload, on every rank (each an agreement: one rank's failure is every rank's, said once
by rank 0):

1. the spec: the same on every rank; each rank's directory (``--dir`` may hold ``{rank}``, ``{host}``), GPU
   (``-d`` may hold ``{local_rank}``; without ``-d`` local rank *i* takes GPU *i* of its host) and part of the job;
2. the data (the shards, the cache), generated once: by rank 0, then by the first rank of each host that cannot
   see it, the others reading their host's (the user's own data is read where it is);
3. every rank's run started together (a load's request shape measured, and its page cache set, before);
4. every rank's record to all; rank 0 prints and writes the job's (the workload's ``merge``), with each host's and
   each rank's figures.

A rank whose engine process dies is marked failed, the others' figures kept, and the exit is non-zero; Ctrl-C
on the launcher keeps what every rank measured; the data's makers remove it once every rank is done."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import msgspec

from xferscope.target import memory_total
from xferscope.workloads.common.job_ranks import JobFacts, RankResult
from xferscope.workloads.common.kind import RunProgress

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
T = TypeVar("T")
S = TypeVar("S")


class DataSet(Protocol):
    """A data set a rank made or reads: where it is, and whether it is read with O_DIRECT."""

    root: str
    direct: bool


D = TypeVar("D", bound=DataSet)


class Ranks(Protocol):
    """This rank's place in the job, and the steps its ranks take together (each an agreement: one rank's failure
    is every rank's, said once by rank 0, after ``cleanup``)."""

    cleanup: Callable[[], None]  # what this rank removes as the job ends, or fails

    @property
    def rank(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def host(self) -> str: ...

    @property
    def hosts(self) -> int: ...

    @property
    def is_root(self) -> bool: ...

    def allgather(self, mine: T) -> list[T]: ...

    def own(self, text: str | None, field: str) -> str | None:
        """``text`` (``--dir``) with this rank's ``{rank}``, ``{host}``, ``{local_rank}`` filled in."""
        ...

    def gpus(self, gpu_text: str | None, uses_gpu: bool, given: tuple[int, ...]) -> tuple[int, ...]:
        """This rank's GPUs: ``-d`` filled in; without it, local rank *i* takes GPU *i* of its host."""
        ...

    def step(self, what: str, work: Callable[[], object], *, here: bool = True) -> None: ...

    def place_data(
        self, directory: str | None, make: Callable[[], D], adopt: Callable[[str, bool], D | None], made_here: D | None
    ) -> D: ...

    def together(
        self,
        run: Callable[[Callable[[], None], Callable[[str], bool]], T],
        outcome: Callable[[T], S],
        cut_short: Callable[[T], bool] = ...,
        *,
        stop_at_word: bool = True,
    ) -> list[S]: ...

    def facts(self) -> JobFacts: ...


class RankJob(Protocol[R_co]):
    """A workload's steps on one rank: ``run`` makes its data (once per host or in all) and measures; the job's
    record, the same on every rank."""

    def run(self) -> R_co: ...


def status_of(result: Any) -> str:
    return getattr(result, "status", "ok")


class RanksJob(NamedTuple):
    """What a workload declares for its run by every rank of an MPI job."""

    #: (the command's request) -> what every rank must agree on: (in words, what must match)
    comparable: Callable[[Any], tuple[str, bytes]]
    #: (this rank, the request, the live line: rank 0's, where shown) -> its steps on this rank
    job: Callable[[Ranks, Any, RunProgress], RankJob]
    status_of: Callable[[Any], str] = status_of  # how the job ended, from its record


def rank_result(ranks: Ranks, result: R, detail: Any = None) -> RankResult:
    """What this rank hands the others as its run ends: its record, ``detail``, its host's memory and CPUs."""
    return RankResult(ranks.rank, ranks.host, result, memory_total(), os.cpu_count(), detail)


class DataSetJob(NamedTuple):
    """What a workload whose ranks read a data set made for them (a cache, shards) declares for its job across the
    ranks (``data_set_job`` makes it a ``RanksJob``). Adding MPI to one is this, and its ``merge``."""

    session: Callable[[Any], Any]  # the session of a rank's spec (check, generate, run, close)
    named: Callable[[Any], str]  # what every rank must run, in words ("model llama3.1-8b")
    given: Callable[[Any], bool]  # the user's own data, read where it is (not made)
    data: str  # the session's attribute that holds its data set
    adopt: Callable[[Any, str, bool], Any]  # (spec, root, direct): a set another rank made, None where unreadable
    part: Callable[[Any, int, int], tuple[int, int]]  # (request, rank, ranks): this rank's part of the job
    merge: Callable[[Sequence[RankResult], JobFacts, Any], Any]  # (every rank's, the facts, the request): the record


class DataSetRankJob(Generic[R]):
    """The steps of a data-set workload on one rank: its data placed, then its run started with every rank's.
    ``request``: what the command made (its ``spec`` and ``gpu_text``: ``-d`` as given)."""

    def __init__(self, ranks: Ranks, job: DataSetJob, request: Any, progress: RunProgress):
        spec = dataclasses.replace(
            request.spec,
            directory=ranks.own(request.spec.directory, "dir"),
            gpus=ranks.gpus(request.gpu_text, True, request.spec.gpus),
            part=job.part(request, ranks.rank, ranks.size),
        ).validate()
        self.ranks, self.job, self.request, self.progress = ranks, job, request, progress
        self.session = job.session(spec)
        self.given = job.given(spec)
        ranks.cleanup = self.session.close

    def run(self) -> R:
        ranks, session = self.ranks, self.session
        made: list[DataSet] = []

        def check_and_make() -> None:
            session.check()
            if ranks.is_root and not self.given:
                made.append(session.generate(self.progress.fill))

        ranks.step("the data", check_and_make)
        if not self.given:
            placed = ranks.place_data(
                session.spec.directory,
                lambda: session.generate(None),
                functools.partial(self.job.adopt, session.spec),
                made[0] if made else None,
            )
            setattr(session, self.job.data, placed)
        everyone = ranks.together(
            lambda on_ready, _meet: session.run(None, None, on_ready),
            lambda result: rank_result(ranks, result),
            lambda result: status_of(result) != "ok",
        )
        return self.job.merge(everyone, ranks.facts(), self.request)


def data_set_job(job: DataSetJob) -> RanksJob:
    """A data-set workload's job across the ranks: every rank runs the same spec, less what is each rank's own
    (directory, GPUs, part)."""

    def comparable(request: Any) -> tuple[str, bytes]:
        spec = dataclasses.replace(request.spec, directory=None, gpus=(0,), part=(0, 1))
        return job.named(request.spec), msgspec.json.encode(spec)

    return RanksJob(comparable, lambda ranks, request, progress: DataSetRankJob(ranks, job, request, progress))
