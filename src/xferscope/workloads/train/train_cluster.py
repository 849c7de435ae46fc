"""The figures of a training run across the ranks of an MPI job (``workload train --mpi``), from every rank's own.

Each rank hands over its record and its accelerators' steps (``RankRun``). The job's figures are made from
every accelerator's steps together, exactly as one process with all of them would make them: AU the mean over
the accelerators (MLPerf averages it), samples/s and MB/s their sums, the I/O wait percentiles over every step.
Beside them: each rank as it measured itself, and each host (its ranks' accelerators together), with the
slowest host named and the data set against the clients' memory (MLPerf's rule: at least 5 times).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from xferscope.workloads.common.job_ranks import JobFacts, by_host, job_status
from xferscope.workloads.train.train_record import (
    AcceleratorRun,
    ClusterFigures,
    HostFigures,
    RankFigures,
    TrainResult,
)
from xferscope.workloads.train.train_spec import TrainSpec

#: MLPerf Storage's rule: the data set at least this many times the clients' summed memory
MEMORY_RULE = 5


class RankRun(NamedTuple):
    """What a rank hands to the others when its run has ended."""

    rank: int
    host: str
    result: TrainResult
    runs: list[AcceleratorRun]
    memory_bytes: int | None  # its host's RAM
    cpus: int  # its host's CPUs


def job_spec(spec: TrainSpec, accelerators: int) -> TrainSpec:
    """The spec of the whole job (``accelerators`` over all ranks), as its record gives it."""
    return dataclasses.replace(spec, accelerators=accelerators, world_accelerators=0, first_accelerator=0)


def _numbered(r: RankRun) -> list[AcceleratorRun]:
    """The rank's accelerators under their numbers in the job."""
    first = r.result.spec.first_accelerator
    return [run._replace(accelerator=first + run.accelerator) for run in r.runs]


def _status(ranks: Sequence[RankRun]) -> tuple[str, str | None]:
    return job_status([(r.rank, r.host, r.result.status, r.result.error) for r in ranks])


def _together(spec: TrainSpec, ranks: Sequence[RankRun], status: str, error: str | None) -> TrainResult:
    """One record of the ranks' accelerators together."""
    runs = [run for r in ranks for run in _numbered(r)]
    first = ranks[0].result
    cpu = [r.result.cpu_seconds for r in ranks]
    rss = [r.result.peak_rss_bytes for r in ranks if r.result.peak_rss_bytes is not None]
    return TrainResult.from_steps(
        job_spec(spec, len(runs)),
        first.data,
        runs,
        status=status,
        seconds=max(r.result.seconds for r in ranks),
        cpu_seconds=None if any(c is None for c in cpu) else sum(c for c in cpu if c is not None),
        peak_rss_bytes=max(rss) if rss else None,
        labels=list(dict.fromkeys(label for r in ranks for label in r.result.labels)),
        environment=first.environment,
        error=error,
    )


def _rank_figures(r: RankRun) -> RankFigures:
    res = r.result
    return RankFigures(
        rank=r.rank,
        host=r.host,
        first_accelerator=res.spec.first_accelerator,
        accelerators=res.spec.accelerators,
        gpus=sorted({a.gpu for a in res.accelerators if a.gpu is not None}),
        status=res.status,
        error=res.error,
        au=res.au,
        samples_per_s=res.samples_per_s,
        mb_per_s=res.mb_per_s,
        bytes_read=res.bytes_read,
        seconds=res.seconds,
    )


def _host_figures(spec: TrainSpec, host: str, ranks: Sequence[RankRun]) -> HostFigures:
    together = _together(spec, ranks, "ok", None)
    return HostFigures(
        host=host,
        ranks=[r.rank for r in ranks],
        accelerators=together.spec.accelerators,
        au=together.au,
        passed=together.passed,
        samples_per_s=together.samples_per_s,
        mb_per_s=together.mb_per_s,
        io_wait_p99_s=together.io_wait_p99_s,
        memory_bytes=ranks[0].memory_bytes,
        cpus=ranks[0].cpus,
    )


def cluster_result(spec: TrainSpec, ranks: Sequence[RankRun], facts: JobFacts) -> TrainResult:
    """The job's record from every rank's (in rank order): the figures of all accelerators together, with
    each rank's and each host's beside them."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    status, error = _status(ranks)
    result = _together(spec, ranks, status, error)
    hosts = [_host_figures(spec, host, rs) for host, rs in by_host(ranks, lambda r: r.host).items()]
    known = [h for h in hosts if h.au is not None]
    memory = [h.memory_bytes for h in hosts]
    clients_memory = sum(m for m in memory if m is not None)
    data_bytes = result.data.get("bytes", 0)
    figures = ClusterFigures(
        ranks=len(ranks),
        launcher=facts.launcher,
        mpi=facts.mpi,
        per_rank=[_rank_figures(r) for r in ranks],
        hosts=hosts,
        slowest_host=min(known, key=lambda h: h.au if h.au is not None else math.inf).host if known else None,
        data_per_host=facts.data_per_host,
        clients_memory_bytes=clients_memory,
        data_to_memory=data_bytes / clients_memory if clients_memory and None not in memory else None,
    )
    return msgspec.structs.replace(result, cluster=figures)


def lowest_host_au(result: TrainResult) -> float:
    """The AU of the job's slowest host (NaN where a host has none): what ``--find-max --mpi`` holds to the
    threshold, so that every host keeps it."""
    if result.cluster is None:
        return math.nan if result.au is None else result.au
    aus = [h.au for h in result.cluster.hosts]
    return math.nan if not aus or any(a is None for a in aus) else min(a for a in aus if a is not None)


def memory_rule_note(result: TrainResult) -> str | None:
    """MLPerf's rule, said where it is not met: the data set under 5 times the clients' summed memory."""
    c = result.cluster
    if c is None or c.data_to_memory is None or c.data_to_memory >= MEMORY_RULE:
        return None
    direct = result.data.get("direct_io")
    return (
        f"the data set is {c.data_to_memory:.2g} times the clients' summed memory; MLPerf Storage asks for at least "
        f"{MEMORY_RULE} times"
        + (" (these reads bypass the page cache: O_DIRECT)" if direct else ", or reads may come from the page cache")
    )
