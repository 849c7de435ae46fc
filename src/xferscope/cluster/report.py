"""Text for a run over several hosts: the usual lines for the whole job, then a table of its hosts."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from xferscope.engines.base import RunResult, Sample
from xferscope.report import done_line, extras_line, gdsio_line, progress_text, text_table
from xferscope.units import figure_text, format_rate

HOST_HEADERS = (
    "host",
    "ranks",
    "MiB/s",
    "IOPS",
    "avg lat",
    "p99 lat",
    "usr CPU %",
    "sys CPU %",
    "first done",
    "last done",
    "status",
)


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


def host_rows(r: RunResult) -> list[tuple[str, ...]]:
    rows = []
    for h in r.hosts:
        c = h.environment.get("cluster") or {}
        rows.append(
            (
                h.environment.get("host", "?"),
                str(c.get("ranks", "")),
                figure_text(h.throughput_mib_s),
                figure_text(h.iops, "{:,.0f}"),
                figure_text(h.latency_us.mean),
                figure_text(h.latency_us.p99),
                figure_text(h.cpu.get("usr_pct")),
                figure_text(h.cpu.get("sys_pct")),
                figure_text(h.first_done.seconds if h.first_done else None, "{:.2f} s"),
                figure_text(h.last_done.seconds if h.last_done else None, "{:.2f} s"),
                h.status + (f" ({h.error})" if h.error else ""),
            )
        )
    return rows


def host_table(r: RunResult) -> Any:
    """A row a host, by the table printer every command's tables go through."""
    return text_table(HOST_HEADERS, host_rows(r), left=("host", "status"), whole=("host",))


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
    lines.append(host_table(r))
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
