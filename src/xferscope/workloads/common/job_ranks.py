"""What the records of a workload across the ranks of an MPI job share, whatever the kind: what a rank hands over,
how the job ended from every rank's status, and its ranks grouped by host."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from xferscope.workloads.common.records import ProcessFields, WorkloadResult

P = TypeVar("P")
R = TypeVar("R")


class JobFacts(NamedTuple):
    """How an MPI job ran: its launcher, its MPI library, and whether each host made a data set of its own."""

    launcher: str
    mpi: str
    data_per_host: bool = False


@dataclass(frozen=True)
class RankResult(Generic[R]):
    """What a rank hands to the others when its run has ended: its record, and its host's memory and CPUs."""

    rank: int
    host: str
    result: R
    memory_bytes: int | None  # its host's RAM
    cpus: int  # its host's CPUs


def job_status(ranks: Sequence[tuple[int, str, str, str | None]]) -> tuple[str, str | None]:
    """The job's status and error from each rank's (rank, host, status, error): failed where a rank failed (the
    first named, with how many more, and the ranks stopped with it), else interrupted where a rank was, else ok."""
    failed = [r for r in ranks if r[2] == "failed"]
    if failed:
        rank, host, _, error = failed[0]
        more = f" (and {len(failed) - 1} more rank{'s' * (len(failed) > 2)})" if len(failed) > 1 else ""
        stopped = [r[0] for r in ranks if r[2] == "interrupted"]
        after = f"; rank{'s' * (len(stopped) > 1)} {', '.join(map(str, stopped))} stopped with it" if stopped else ""
        return "failed", f"rank {rank} on {host}: {error or 'failed'}{more}{after}"
    if any(r[2] == "interrupted" for r in ranks):
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
