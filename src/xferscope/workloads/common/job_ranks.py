"""What the records of a workload across the ranks of an MPI job share, whatever the kind: what a rank hands over,
how the job ended from every rank's status, its ranks grouped by host, and the job's record of its ranks and hosts
(``JobRankRow``, ``JobHostRow`` and ``JobRecord``, or ``DataJobRecord`` for a job that reads a data set made for it,
which each kind extends by its own figures, made by ``job_record``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

import msgspec

from xferscope.workloads.common.records import ProcessFields, WorkloadResult

P = TypeVar("P")
R = TypeVar("R")
D = TypeVar("D")
H = TypeVar("H", bound="JobHostRow")
J = TypeVar("J", bound="JobRecord")


class JobFacts(NamedTuple):
    """How an MPI job ran: its launcher, its MPI library, and whether each host made a data set of its own."""

    launcher: str
    mpi: str
    data_per_host: bool = False


@dataclass(frozen=True)
class RankResult(Generic[R, D]):
    """What a rank hands to the others when its run has ended: its record, what the job's figures are made from
    beyond it (``detail``: a training rank's accelerator steps, a checkpoint rank's times; None where the record
    is enough), and its host's memory and CPUs."""

    rank: int
    host: str
    result: R
    memory_bytes: int | None  # its host's RAM
    cpus: int | None  # its host's CPUs (None: not known)
    detail: D = None  # type: ignore[assignment]

    def row_fields(self, gpus: Sequence[int | None]) -> dict[str, Any]:
        """The fields every rank row (``JobRankRow``) has: this rank, its host, ``gpus`` and its record's status."""
        return {
            "rank": self.rank,
            "host": self.host,
            "gpus": sorted({g for g in gpus if g is not None}),
            "status": self.result.status,  # type: ignore[attr-defined]
            "error": self.result.error,  # type: ignore[attr-defined]
        }


class JobRankRow(msgspec.Struct, kw_only=True):
    """One rank of an MPI job in the job's record, as it measured itself; each kind adds its figures."""

    rank: int
    host: str
    gpus: list[int]  # where its data landed or came from (none: host memory)
    status: str
    error: str | None = None


class JobHostRow(msgspec.Struct, kw_only=True):
    """One host of an MPI job: its ranks taken together; each kind adds its figures."""

    host: str
    ranks: list[int]  # the job's ranks on it
    memory_bytes: int | None  # the host's RAM
    cpus: int | None  # the host's CPUs (None: not known)


class JobRecord(msgspec.Struct, kw_only=True):
    """An MPI job's ranks and hosts (each kind's record names its rows' types and adds its own facts)."""

    ranks: int
    launcher: str
    mpi: str
    slowest_host: str | None


class DataJobRecord(JobRecord, kw_only=True):
    """A job whose ranks read a data set made for them (a training set, a cache, shards): ``job_record`` sets
    where it was made from the job's facts."""

    data_per_host: bool  # each host read a set of its own (else one set on a shared filesystem)


def host_row_fields(host: str, ranks: Sequence[RankResult]) -> dict[str, Any]:
    """The fields every host row has, from its ranks."""
    return {
        "host": host,
        "ranks": [r.rank for r in ranks],
        "memory_bytes": ranks[0].memory_bytes,
        "cpus": ranks[0].cpus,
    }


def job_record(
    kind: type[J],
    ranks: Sequence[RankResult],
    facts: JobFacts,
    rank_row: Callable[[RankResult], JobRankRow],
    host_row: Callable[[str, list[RankResult]], H],
    worse: Callable[[H], float | None],
    **own: Any,
) -> tuple[J, list[H], str, str | None]:
    """The job's record of ``kind`` from its ranks (in rank order): a row a rank, a row a host, and the slowest
    host, the one whose ``worse`` figure is highest (None: not measured); ``own``: the kind's own facts. With it,
    the host rows (for the kind's figures over them) and the job's status and error (``job_status``)."""
    hosts = [host_row(h, rs) for h, rs in by_host(ranks, lambda r: r.host).items()]
    known = [h for h in hosts if worse(h) is not None]
    slowest = max(known, key=lambda h: worse(h) or 0.0).host if known else None
    rows = {"per_rank": [rank_row(r) for r in ranks], "hosts": hosts}  # the kind's own types
    if issubclass(kind, DataJobRecord):
        own["data_per_host"] = facts.data_per_host
    record = kind(ranks=len(ranks), launcher=facts.launcher, mpi=facts.mpi, slowest_host=slowest, **rows, **own)
    return (record, hosts, *job_status(ranks))


def job_status(ranks: Sequence[RankResult]) -> tuple[str, str | None]:
    """The job's status and error from each rank's record: failed where a rank failed (the first named, with how
    many more, and the ranks stopped with it), else interrupted where a rank was, else ok."""
    failed = [r for r in ranks if r.result.status == "failed"]
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more rank{'s' * (len(failed) > 2)})" if len(failed) > 1 else ""
        stopped = [r.rank for r in ranks if r.result.status == "interrupted"]
        after = f"; rank{'s' * (len(stopped) > 1)} {', '.join(map(str, stopped))} stopped with it" if stopped else ""
        return "failed", f"rank {first.rank} on {first.host}: {first.result.error or 'failed'}{more}{after}"
    if any(r.result.status == "interrupted" for r in ranks):
        return "interrupted", None
    return "ok", None


def by_host(parts: Sequence[P], host: Callable[[P], str]) -> dict[str, list[P]]:
    """``parts`` grouped by their host, hosts in the order of their first rank."""
    out: dict[str, list[P]] = {}
    for p in parts:
        out.setdefault(host(p), []).append(p)
    return out


def process_totals(results: Sequence[WorkloadResult], moved_bytes: int) -> ProcessFields:
    """The job's process figures from its ranks': CPU seconds summed (None where a rank has none) and per GiB of
    ``moved_bytes``, the largest peak RSS, and every label once."""
    each = [r.cpu_seconds for r in results]
    cpu = None if any(c is None for c in each) else sum(c for c in each if c is not None)
    rss = [r.peak_rss_bytes for r in results if r.peak_rss_bytes is not None]
    return {
        "cpu_seconds": cpu,
        "cpu_s_per_gib": cpu / (moved_bytes / (1 << 30)) if cpu is not None and moved_bytes else None,
        "peak_rss_bytes": max(rss) if rss else None,
        "labels": list(dict.fromkeys(label for r in results for label in r.labels)),
    }
