"""Text for a run over several hosts: the usual lines for the whole job, then a table of its hosts and one of its ranks,
by the printer of every MPI job's rows (``output.job_tables``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from xferscope.engines.base import RunResult, Sample
from xferscope.report import done_line, extras_line, gdsio_line, progress_text
from xferscope.units import figure_text, format_rate
from xferscope.workloads.common.job_ranks import JobHostRow, JobRankRow, JobRecord
from xferscope.workloads.common.job_tables import Column, gpus_cell, host_and_rank_tables


def whole_job(r: RunResult) -> RunResult:
    """``r`` with the spec's worker count raised to every rank's workers, for gdsio's Threads and data set."""
    total = (r.environment.get("cluster") or {}).get("workers_total")
    if not total:
        return r
    return dataclasses.replace(r, spec=dataclasses.replace(r.spec, workers=total))


def layout_line(r: RunResult) -> str:
    c = r.environment.get("cluster") or {}
    ranks, hosts, workers = c.get("ranks") or 0, len(c.get("hosts") or []), c.get("workers_per_rank") or 0
    return (
        f"Cluster: {_n(ranks, 'rank')} on {_n(hosts, 'host')}, {_n(workers, 'worker')} per rank "
        f"({c.get('launcher')}, {c.get('mpi')})"
    )


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


class RunRankRow(JobRankRow, kw_only=True):
    """One rank of a run over several hosts as its table shows it (``environment["cluster"]["per_rank"]``)."""

    workers: int | None
    mib_s: float | None
    first_done_s: float | None


class RunHostRow(JobHostRow, kw_only=True):
    """One host of a run over several hosts: its ranks' run taken together (an entry of the run's ``hosts``)."""

    mib_s: float
    iops: float
    latency_us: tuple[float, float]  # mean, p99
    cpu_pct: tuple[float | None, float | None]  # usr, sys
    done_s: tuple[float | None, float | None]  # first, last
    status: str
    error: str | None


class RunJob(JobRecord, kw_only=True):
    """A run over several hosts as an MPI job's rows: a row a host and a row a rank."""

    hosts: list[RunHostRow]
    per_rank: list[RunRankRow]


def run_job(r: RunResult) -> RunJob:
    """The job's rows from the run's record: each host's run, each rank's row."""
    c = r.environment.get("cluster") or {}
    hosts = [
        RunHostRow(
            host=h.environment.get("host", "?"),
            ranks=[k["rank"] for k in (h.environment.get("cluster") or {}).get("per_rank") or []],
            memory_bytes=None,  # not in a run's record
            cpus=h.environment.get("cpu_count"),
            mib_s=h.throughput_mib_s,
            iops=h.iops,
            latency_us=(h.latency_us.mean, h.latency_us.p99),
            cpu_pct=(h.cpu.get("usr_pct"), h.cpu.get("sys_pct")),
            done_s=(h.first_done.seconds if h.first_done else None, h.last_done.seconds if h.last_done else None),
            status=h.status,
            error=h.error,
        )
        for h in r.hosts
    ]
    ranks = [
        RunRankRow(
            rank=k["rank"],
            host=k["host"],
            gpus=list(k.get("gpus") or []),
            status=k["status"],
            error=k.get("error"),
            workers=k.get("workers"),
            mib_s=k.get("throughput_mib_s"),
            first_done_s=k.get("first_done_s"),
        )
        for k in c.get("per_rank") or []
    ]
    facts = {"ranks": len(ranks), "launcher": c.get("launcher") or "?", "mpi": c.get("mpi") or "?"}
    return RunJob(**facts, slowest_host=c.get("slowest_host"), hosts=hosts, per_rank=ranks)


def _seconds(value: float | None) -> str:
    return figure_text(value, "{:.2f} s")


#: a host's columns (its ranks' run), then a rank's, between the columns every job's tables have
HOST_COLUMNS: list[Column] = [
    ("MiB/s", lambda h: figure_text(h.mib_s)),
    ("IOPS", lambda h: figure_text(h.iops, "{:,.0f}")),
    ("avg lat", lambda h: figure_text(h.latency_us[0])),
    ("p99 lat", lambda h: figure_text(h.latency_us[1])),
    ("usr CPU %", lambda h: figure_text(h.cpu_pct[0])),
    ("sys CPU %", lambda h: figure_text(h.cpu_pct[1])),
    ("first done", lambda h: _seconds(h.done_s[0])),
    ("last done", lambda h: _seconds(h.done_s[1])),
    ("status", lambda h: h.status + (f" ({h.error})" if h.error else "")),
]
RANK_COLUMNS: list[Column] = [
    ("GPUs", gpus_cell),
    ("workers", lambda k: figure_text(k.workers, "{}")),
    ("MiB/s", lambda k: figure_text(k.mib_s)),
    ("first done", lambda k: _seconds(k.first_done_s)),
]


def slowest_line(r: RunResult) -> str | None:
    """The slowest host and how far it is behind the fastest."""
    name = (r.environment.get("cluster") or {}).get("slowest_host")
    if not name or len(r.hosts) < 2:
        return None
    by_name = {h.environment.get("host"): h for h in r.hosts}
    slow = by_name.get(name)
    fast = max(r.hosts, key=lambda h: h.throughput_mib_s)
    if slow is None:
        return None
    behind = 100.0 * (1 - slow.throughput_mib_s / fast.throughput_mib_s) if fast.throughput_mib_s > 0 else math.nan
    return (
        f"Slowest host: {name} at {figure_text(slow.throughput_mib_s)} MiB/s, {figure_text(behind, '{:.0f}')}% below the fastest "
        f"({fast.environment.get('host')}, {figure_text(fast.throughput_mib_s)} MiB/s)"
    )


def cluster_lines(r: RunResult) -> list[Any]:
    """Everything printed for one result of a run over several hosts."""
    job = whole_job(r)
    lines = [gdsio_line(job), extras_line(job)]
    done = done_line(job)
    if done:
        lines.append(done)
    lines.append(layout_line(r))
    lines += host_and_rank_tables(run_job(r), HOST_COLUMNS, RANK_COLUMNS, left=("status",))
    slowest = slowest_line(r)
    if slowest:
        lines.append(slowest)
    return lines


def cluster_progress_text(s: Sample, per_host: dict[str, Sample], duration: float | None) -> str:
    """The live line on rank 0: the whole job, then the slowest host this interval."""
    text = progress_text(s, duration)
    if len(per_host) > 1:
        host, slow = min(per_host.items(), key=lambda kv: kv[1].throughput_gib_s)
        text += f"  | {len(per_host)} hosts, slowest {host} {format_rate(slow.throughput_gib_s * (1 << 30))}"
    return text
