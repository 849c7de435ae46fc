"""From the runs of one knee search to its figures: knee, plateau, latency, Little's law, CPU, PCIe, and the
evidence the ceiling rules judge. Every figure is the median over the runs of the point it belongs to."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from xferscope.engines.base import RunResult
from xferscope.saturate.ceilings import BottleneckFinding, Evidence, bottleneck
from xferscope.saturate.plan import Series
from xferscope.saturate.search import InFlight, SearchResult
from xferscope.stats import median_of
from xferscope.telemetry.gpu import summed_over_gpus


@dataclass
class Measurement:
    """One run at one point of a search (``throughput`` in GiB/s, what the search compares)."""

    result: RunResult
    cpus_allowed: int | None = None  # the CPUs the engine's threads may use (per rank)

    @property
    def throughput(self) -> float:
        return self.result.throughput_gib_s if self.result.status == "ok" else math.nan


def cpus_allowed(spec) -> int:
    """The CPUs a run's workers may use: ``--cpus``, the ``--numa`` node's CPUs, or this process's affinity."""
    if spec.cpus:
        return len(set(spec.cpus))
    if spec.numa_node is not None:
        from xferscope.engines.native import numa_cpus

        try:
            return len(numa_cpus(spec.numa_node)) or 1
        except Exception:
            pass
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def ranks_of(result: RunResult) -> int:
    cluster = result.environment.get("cluster")
    return int(cluster.get("ranks") or 1) if isinstance(cluster, dict) else 1


def _gpu_sum(result: RunResult, key: str) -> float | None:

    return summed_over_gpus(result.gpus, key)


def _engine_cpu(result: RunResult) -> tuple[float | None, float | None]:
    """(engine threads' CPU in percent of one core, the busiest thread's); over several hosts, the busiest
    host's (the whole job is as fast as its slowest host)."""
    sources = [h.cpu for h in result.hosts] or [result.cpu]
    best = None
    for cpu in sources:
        usr, sys_ = cpu.get("engine_usr_pct"), cpu.get("engine_sys_pct")
        if usr is None or sys_ is None:
            continue
        total = float(usr) + float(sys_)
        if best is None or total > best[0]:
            best = (total, cpu.get("engine_busiest_thread_pct"))
    return best if best else (None, None)


def _system_busy(result: RunResult) -> float | None:
    sources = [h.cpu for h in result.hosts] or [result.cpu]
    values = [
        float(c["sys_usr_pct"]) + float(c["sys_sys_pct"])
        for c in sources
        if c.get("sys_usr_pct") is not None and c.get("sys_sys_pct") is not None
    ]
    return max(values) if values else None


def _pcie_ceiling(result: RunResult, writes: bool) -> float | None:
    key = "link_ceiling_d2h_gb_s" if writes else "link_ceiling_h2d_gb_s"
    return _gpu_sum(result, key)


@dataclass
class Figures:
    """A search's answer at one block size; rates in GiB/s, latency in microseconds."""

    knee: InFlight
    plateau: InFlight
    ranks: int
    concurrency: int  # in flight at the knee, over every worker of every rank
    plateau_gib_s: float
    plateau_min_gib_s: float
    plateau_max_gib_s: float
    plateau_iops: float
    knee_gib_s: float
    knee_iops: float
    lat_mean_us: float | None
    lat_p99_us: float | None
    little_in_flight: float | None  # IOPS x mean latency
    little_ratio: float | None  # ... against the concurrency
    cpu_s_per_gib: float | None
    engine_cpu_pct: float | None
    busiest_thread_pct: float | None
    system_busy_pct: float | None
    cpus_allowed: int | None
    pcie_mb_s: float | None
    pcie_ceiling_gb_s: float | None
    page_cache: bool
    compat: bool
    split: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["knee"] = {"workers": self.knee.workers, "iodepth": self.knee.iodepth, "label": self.knee.label}
        d["plateau"] = {"workers": self.plateau.workers, "iodepth": self.plateau.iodepth, "label": self.plateau.label}
        return d


def figures_of(found: SearchResult, writes: bool) -> Figures | None:
    """The figures of a finished (or stopped) search; None when nothing was measured."""
    if found.knee is None or found.plateau is None:
        return None
    knee, plateau = found.point(found.knee), found.point(found.plateau)
    runs = [m.result for m in knee.measurements if m.result.status == "ok"]
    if not runs:
        return None
    ranks = ranks_of(runs[0])
    iops = median_of(r.iops for r in runs)
    lat = median_of(r.latency_us.mean for r in runs)
    concurrency = found.knee.concurrency * ranks
    in_flight = iops * lat / 1e6 if iops is not None and lat is not None else None
    engine = [_engine_cpu(r) for r in runs]
    direction = "pcie_tx_mb_s" if writes else "pcie_rx_mb_s"
    return Figures(
        knee=found.knee,
        plateau=found.plateau,
        ranks=ranks,
        concurrency=concurrency,
        plateau_gib_s=found.plateau_value if found.plateau_value is not None else plateau.median,
        plateau_min_gib_s=plateau.low,
        plateau_max_gib_s=plateau.high,
        plateau_iops=median_of(m.result.iops for m in plateau.measurements) or 0.0,
        knee_gib_s=knee.median,
        knee_iops=iops or 0.0,
        lat_mean_us=lat,
        lat_p99_us=median_of(r.latency_us.p99 for r in runs),
        little_in_flight=in_flight,
        little_ratio=in_flight / concurrency if in_flight is not None else None,
        cpu_s_per_gib=median_of(r.cpu_seconds_per_gib for r in runs),
        engine_cpu_pct=median_of(e[0] for e in engine),
        busiest_thread_pct=median_of(e[1] for e in engine),
        system_busy_pct=median_of(_system_busy(r) for r in runs),
        cpus_allowed=_cpus(knee.measurements, ranks),
        pcie_mb_s=median_of(_gpu_sum(r, direction) for r in runs),
        pcie_ceiling_gb_s=median_of(_pcie_ceiling(r, writes) for r in runs),
        page_cache=any(r.environment.get("io_mode") == "buffered" for r in runs),
        compat=any(r.environment.get("cufile_mode") == "compat" for r in runs),
        split=runs[0].spec.split,
    )


def _cpus(measurements, ranks: int) -> int | None:
    values = [m.cpus_allowed for m in measurements if m.cpus_allowed]
    return values[0] if values else None


def evidence_of(
    series: Series,
    found: SearchResult,
    figures: Figures,
    *,
    writes: bool,
    limit: str,
    storage_gib_s: float | None,
    storage_note: str | None,
    own_ceiling_gib_s: float | None = None,
    own_ceiling_note: str | None = None,
) -> Evidence:
    return Evidence(
        path=series.path,
        block_size=series.block_size,
        knee=figures.knee.label + _per_rank(figures),
        plateau_gib_s=figures.plateau_gib_s,
        writes=writes,
        storage_gib_s=storage_gib_s,
        storage_note=storage_note,
        pcie_ceiling_gb_s=figures.pcie_ceiling_gb_s,
        pcie_mb_s=figures.pcie_mb_s,
        engine_cpu_pct=figures.engine_cpu_pct,
        cpus_allowed=figures.cpus_allowed,
        busiest_thread_pct=figures.busiest_thread_pct,
        system_busy_pct=figures.system_busy_pct,
        page_cache=figures.page_cache,
        compat=figures.compat,
        split=figures.split,
        little_ratio=figures.little_ratio,
        little_in_flight=figures.little_in_flight,
        concurrency=figures.concurrency,
        unsaturated=" and ".join(found.unsaturated) or None,
        limit=limit,
        own_ceiling_gib_s=own_ceiling_gib_s,
        own_ceiling_note=own_ceiling_note,
    )


def _per_rank(figures: Figures) -> str:
    return f" per rank ({figures.ranks} ranks)" if figures.ranks > 1 else ""


def judge(series: Series, found: SearchResult, figures: Figures, **kwargs) -> tuple[Evidence, BottleneckFinding]:
    evidence = evidence_of(series, found, figures, **kwargs)
    return evidence, bottleneck(evidence)
