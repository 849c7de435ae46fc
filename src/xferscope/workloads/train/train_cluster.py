"""The figures of a training run across the ranks of an MPI job (``workload train --mpi``), from every rank's own.

Each rank hands over its record and its accelerators' steps (``TrainRank``). The job's figures are made from
every accelerator's steps together, exactly as one process with all of them would make them: AU the mean over
the accelerators (MLPerf averages it), samples/s and MB/s their sums, the I/O wait percentiles over every step.
Beside them: each rank as it measured itself, and each host (its ranks' accelerators together), with the
slowest host named and the data set against the clients' memory (MLPerf's rule: at least 5 times).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import msgspec

from xferscope.workloads.common.job_ranks import JobFacts, RankResult, by_host, host_row_fields, job_record
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


#: what a rank hands to the others when its run has ended: its record, its accelerators' steps as the detail
TrainRank = RankResult[TrainResult, list[AcceleratorRun]]


def job_spec(spec: TrainSpec, accelerators: int) -> TrainSpec:
    """The spec of the whole job (``accelerators`` over all ranks), as its record gives it."""
    return dataclasses.replace(spec, accelerators=accelerators, world_accelerators=0, first_accelerator=0)


def _numbered(r: TrainRank) -> list[AcceleratorRun]:
    """The rank's accelerators under their numbers in the job."""
    first = r.result.spec.first_accelerator
    return [run._replace(accelerator=first + run.accelerator) for run in r.detail]


def _together(spec: TrainSpec, ranks: Sequence[TrainRank], status: str, error: str | None) -> TrainResult:
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


def _rank_figures(r: TrainRank) -> RankFigures:
    res = r.result
    return RankFigures(
        **r.row_fields([a.gpu for a in res.accelerators]),
        first_accelerator=res.spec.first_accelerator,
        accelerators=res.spec.accelerators,
        au=res.au,
        samples_per_s=res.samples_per_s,
        mb_per_s=res.mb_per_s,
        bytes_read=res.bytes_read,
        seconds=res.seconds,
    )


def _host_figures(spec: TrainSpec, host: str, ranks: Sequence[TrainRank]) -> HostFigures:
    together = _together(spec, ranks, "ok", None)
    return HostFigures(
        **host_row_fields(host, ranks),
        accelerators=together.spec.accelerators,
        au=together.au,
        passed=together.passed,
        samples_per_s=together.samples_per_s,
        mb_per_s=together.mb_per_s,
        io_wait_p99_s=together.io_wait_p99_s,
    )


def cluster_result(spec: TrainSpec, ranks: Sequence[TrainRank], facts: JobFacts) -> TrainResult:
    """The job's record from every rank's (in rank order): the figures of all accelerators together, with
    each rank's and each host's beside them."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    memory = [rs[0].memory_bytes for rs in by_host(ranks, lambda r: r.host).values()]  # each host's RAM
    clients = sum(m for m in memory if m is not None)
    data_bytes = ranks[0].result.data.get("bytes", 0)
    figures, _, status, error = job_record(
        ClusterFigures,
        ranks,
        facts,
        _rank_figures,
        lambda host, rs: _host_figures(spec, host, rs),
        lambda h: None if h.au is None else -h.au,  # the lowest AU
        clients_memory_bytes=clients,
        data_to_memory=data_bytes / clients if clients and None not in memory else None,
    )
    return msgspec.structs.replace(_together(spec, ranks, status, error), cluster=figures)


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
