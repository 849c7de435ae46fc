"""What a memory sweep (or an imported MLC output) produced: its points and the sweep (``records.MemPoint``,
``records.MemSweep``: one type at run time and in the file), the kinds of points, their files, and the sanity checks
of a trustworthy curve."""

from __future__ import annotations

import csv
import io
import math
import os
import statistics
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any, cast

from xferscope import records
from xferscope.errors import FormatError
from xferscope.memory.spec import MemSpec
from xferscope.records import MemPoint, MemSweep
from xferscope.units import format_size

CSV_COLUMNS = (
    "delay",
    "latency_ns",
    "bandwidth_mb_s",
    "read_mb_s",
    "write_mb_s",
    "traffic",
    "stride",
    "backend",
    "locality",
    "size_bytes",
    "cpu_node",
    "mem_node",
)
IDLE = "idle"  # the traffic label of an idle-latency point
CURVE = "curve"  # the traffic label of a point of the cache-level curve (latency against working-set size)
WHOLE_BUFFER = "whole-buffer"  # the locality label of a chase over the whole buffer


def in_matrix(point: MemPoint) -> bool:
    """A cell of a NUMA matrix (measured by one node's CPUs on one node's memory)."""
    return point.cpu_node is not None


def csv_row(point: MemPoint) -> list[str]:
    """A point as ``mem --csv`` writes it (columns CSV_COLUMNS)."""
    return [
        _cell(point.delay, "{}"),
        _cell(point.latency_ns, "{:.2f}"),
        _cell(point.bandwidth_mb_s, "{:.1f}"),
        _cell(point.read_mb_s, "{:.1f}"),
        _cell(point.write_mb_s, "{:.1f}"),
        point.traffic or "",
        _cell(point.stride, "{}"),
        point.backend or "",
        point.locality or "",
        _cell(point.size_bytes, "{}"),
        _cell(point.cpu_node, "{}"),
        _cell(point.mem_node, "{}"),
    ]


def _cell(value: Any, fmt: str) -> str:
    return "" if value is None else fmt.format(value)


def new_sweep(backend: str, spec: MemSpec | None = None, **facts: Any) -> MemSweep:
    """An empty sweep: what a sweep (or an imported MLC output) fills in as it goes. The sweep's record is its one
    type, at run time and in its file; the figures derived from its points are set as it ends (``with_figures``)."""
    return MemSweep(
        schema_version=records.SCHEMA_VERSION,
        backend=backend,
        mode=spec.mode if spec else None,
        spec=None if spec is None else asdict(spec),
        points=[],
        **facts,
    )


# -- the kinds of points


def idle_points(points: Iterable[MemPoint]) -> list[MemPoint]:
    """Idle latency (outside a NUMA matrix): the chosen locality first, then the whole buffer."""
    return [p for p in points if p.traffic == IDLE and not in_matrix(p)]


def idle_point(points: list[MemPoint], whole: bool = False) -> MemPoint | None:
    """The idle-latency point (a local matrix cell where there is none); with ``whole``, the whole-buffer idle
    latency measured beside a windowed one (None when there is no such pair)."""
    idle = [p for p in idle_points(points) if p.latency_ns is not None]
    if not idle:
        local = [p for p in points if p.traffic == IDLE and in_matrix(p) and p.cpu_node == p.mem_node]
        return local[0] if local and not whole else None
    if whole:
        first = idle[0]
        return next(
            (
                p
                for p in idle[1:]
                if p.locality == WHOLE_BUFFER and p.stride == first.stride and first.locality != WHOLE_BUFFER
            ),
            None,
        )
    return idle[0]


def curve_points(points: Iterable[MemPoint]) -> list[MemPoint]:
    """Loaded-latency and peak-bandwidth points (neither idle, nor the cache curve, nor a matrix cell)."""
    return [p for p in points if p.traffic not in (IDLE, CURVE) and not in_matrix(p)]


def loaded_points(points: Iterable[MemPoint]) -> list[MemPoint]:
    return [p for p in curve_points(points) if p.latency_ns is not None]


def peak_points(points: Iterable[MemPoint]) -> list[MemPoint]:
    return [p for p in curve_points(points) if p.latency_ns is None]


def cache_curve(points: Iterable[MemPoint]) -> list[MemPoint]:
    return [p for p in points if p.traffic == CURVE]


def matrix_points(points: Iterable[MemPoint]) -> list[MemPoint]:
    return [p for p in points if in_matrix(p)]


def numa_matrix(points: Iterable[MemPoint]) -> records.NumaMatrix | None:
    """The NUMA matrix: node numbers, latency_ns[cpu node][memory node], bandwidth_mb_s likewise (None where
    not measured); None when there are no matrix cells."""
    cells = [(p, p.cpu_node, p.mem_node) for p in points if p.cpu_node is not None and p.mem_node is not None]
    if not cells:
        return None
    cpu_nodes = sorted({cpu for _, cpu, _ in cells})
    mem_nodes = sorted({mem for _, _, mem in cells})
    latency: list[list[float | None]] = [[None] * len(mem_nodes) for _ in cpu_nodes]
    bandwidth: list[list[float | None]] = [[None] * len(mem_nodes) for _ in cpu_nodes]
    for p, cpu, mem in cells:
        i, j = cpu_nodes.index(cpu), mem_nodes.index(mem)
        if p.traffic == IDLE and p.latency_ns is not None:
            latency[i][j] = p.latency_ns
        elif p.bandwidth_mb_s is not None:
            bandwidth[i][j] = p.bandwidth_mb_s
    out: records.NumaMatrix = {"cpu_nodes": cpu_nodes, "mem_nodes": mem_nodes}
    if any(v is not None for row in latency for v in row):
        out["latency_ns"] = latency
    if any(v is not None for row in bandwidth for v in row):
        out["bandwidth_mb_s"] = bandwidth
    return out


def sweep_name(sweep: MemSweep) -> str:
    """How a sweep is named beside others: 'builtin', 'mlc', 'mlc (FILE)' for one read from a file."""
    return f"{sweep.backend} ({os.path.basename(sweep.source)})" if sweep.source else sweep.backend


def with_figures(sweep: MemSweep) -> MemSweep:
    """``sweep`` with the figures its points give (idle latency, the matrix, the cache levels) set again from them,
    as ``mem --json`` writes them (in this version's schema): set as a sweep ends (``sweep.finish_result``), as
    MLC's text is read and as a file is read (an earlier version's figures derived again)."""
    idle, whole, curve = idle_point(sweep.points), idle_point(sweep.points, whole=True), cache_curve(sweep.points)
    sweep.schema_version, sweep.incomplete = records.SCHEMA_VERSION, sweep.error is not None
    sweep.idle_latency_ns, sweep.idle_locality = (idle.latency_ns, idle.locality) if idle else (None, None)
    sweep.whole_idle_latency_ns = whole.latency_ns if whole else None
    sweep.matrix = numa_matrix(sweep.points)
    sweep.cache_levels = cache_plateaus(curve, sweep.environment.get("caches") or []) if curve else None
    return sweep


def read_sweep(rec: MemSweep, where: str) -> MemSweep:
    """A sweep read from its file (``mem --json``, ``import mlc --json``): each point names its backend; FormatError
    for a point without a traffic type."""
    for p in rec.points:
        if p.traffic is None:
            raise FormatError(where, None, "a memory point without a traffic type")
        p.backend = p.backend or rec.backend
    rec.source = rec.source or where
    return with_figures(rec)


def is_mem_result(data: Any) -> bool:
    """Whether parsed JSON looks like a memory result (a dict, or a list of them, with memory points)."""
    first = data[0] if isinstance(data, list) and data else data
    return (
        isinstance(first, dict)
        and isinstance(first.get("points"), list)
        and "backend" in first
        and "throughput_mib_s" not in first
    )


def pages_shares(obtained: dict[int, int]) -> dict[str, float]:
    """{page bytes: resident bytes} -> {"4K": share, "2M": share} in rising page size."""
    total = sum(obtained.values())
    return {format_size(k): v / total for k, v in sorted(obtained.items())} if total else {}


def csv_text(points: Iterable[MemPoint]) -> str:
    """One row per point, columns CSV_COLUMNS (what ``mem --csv`` writes)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(csv_row(p) for p in points)
    return out.getvalue()


def result_json(sweep: MemSweep) -> str:
    return records.json_text(sweep)


# ------------------------------------------------------------ the cache curve


#: consecutive working sets whose latencies are within this factor of their run's median form one plateau
PLATEAU_BAND = 1.25
#: a plateau higher than the one below by at least this factor "rises"
PLATEAU_RISE = 1.2


def cache_plateaus(points: Iterable[MemPoint], caches: Iterable[records.CacheSize]) -> list[records.Plateau]:
    """The curve's plateaus, found in the measurements (not assumed from the cache sizes): runs of consecutive
    working sets whose latencies stay within PLATEAU_BAND of the run's median, at least three sets over at
    least a doubling of the working set, the transitions between them left out; runs that differ less than PLATEAU_RISE are one plateau. Each is named
    by the smallest cache level (``caches``: [{"name": "L1d", "size": bytes}, ...] from sysfs) that holds its
    largest working set, or ``memory`` beyond the last, and says whether it rises above the plateau below
    (``rises``) and whether it ends well before the size sysfs gives its level (``ends_early``: a cache shared
    with other tenants, or partitioned)."""
    curve = sorted((p.size_bytes, p.latency_ns) for p in points if p.size_bytes and p.latency_ns)
    runs: list[list[tuple[int, float]]] = []
    for size, lat in curve:
        if runs and abs(math.log(lat / statistics.median(x for _, x in runs[-1]))) < math.log(PLATEAU_BAND):
            runs[-1].append((size, lat))
        else:
            runs.append([(size, lat)])
    merged: list[list[tuple[int, float]]] = []
    for run in (r for r in runs if len(r) > 1):  # a lone point is a transition or a disturbed window
        if merged and abs(
            math.log(statistics.median(x for _, x in run) / statistics.median(x for _, x in merged[-1]))
        ) < math.log(PLATEAU_RISE):
            merged[-1] = merged[-1] + run
        else:
            merged.append(run)
    merged = [r for r in merged if len(r) >= 3 and r[-1][0] >= 2 * r[0][0]]
    levels = sorted((int(c["size"]), str(c["name"])) for c in caches if c.get("size"))
    out: list[records.Plateau] = []
    for run in merged:
        last = run[-1][0]
        level = next(((size, name) for size, name in levels if last <= size), None)
        latency = statistics.median(x for _, x in run)
        out.append(
            {
                "level": level[1] if level else "memory" if levels else f"plateau {len(out) + 1}",
                "from_bytes": run[0][0],
                "to_bytes": last,
                "points": len(run),
                "latency_ns": latency,
                "rises": None if not out else latency > PLATEAU_RISE * out[-1]["latency_ns"],
                "ends_early": bool(level and last * 4 <= level[0]),
            }
        )
    return out


def rising_plateaus(plateaus: list[records.Plateau]) -> int:
    """How many plateaus rise in order from the first (the first counts as one)."""
    count = 1 if plateaus else 0
    for p in plateaus[1:]:
        if not p["rises"]:
            break
        count += 1
    return count


# ------------------------------------------------------------- sanity


IDLE_RANGE_NS = (60.0, 200.0)


def sanity_warnings(points: list[MemPoint]) -> list[str]:
    """The checks of a trustworthy curve; each is a warning, never a failure."""
    out: list[str] = []
    idle_of: dict[tuple[int | None, str | None], float] = {}
    for p in points:
        if p.traffic != IDLE or in_matrix(p) or not p.latency_ns:
            continue
        idle_of.setdefault((p.stride, p.locality), p.latency_ns)
        if not IDLE_RANGE_NS[0] <= p.latency_ns <= IDLE_RANGE_NS[1]:
            where = f"stride {p.stride}" + (f", {p.locality}" if p.locality else "")
            out.append(
                f"idle latency {p.latency_ns:.1f} ns ({where}) is outside the 60-200 ns usual for DRAM: "
                "the buffer may fit in cache, or the memory is remote or slow"
            )
    for (traffic, stride), series in group_series(p for p in points if not in_matrix(p)).items():
        if traffic in (IDLE, CURVE):
            continue
        series = sorted(series, key=lambda p: p.delay or 0)
        lat = [p for p in series if p.latency_ns is not None]
        idle = idle_of.get((stride, lat[0].locality)) if lat else None
        if idle is None and lat:
            idle = next((v for (s, _), v in idle_of.items() if s == stride), None)
        if idle and len(lat) >= 2:
            last, last_ns = lat[-1], cast(float, lat[-1].latency_ns)  # lat holds measured latencies only
            if abs(last_ns - idle) > 0.05 * idle:
                out.append(
                    f"{traffic} stride {stride}: latency at the largest delay ({last.delay}) is "
                    f"{last_ns:.1f} ns, more than 5% away from idle ({idle:.1f} ns)"
                )
            first, first_ns = lat[0], cast(float, lat[0].latency_ns)
            if first.delay == 0 and first_ns < 1.3 * idle:
                out.append(
                    f"{traffic} stride {stride}: latency at delay 0 ({first_ns:.1f} ns) is below "
                    f"1.3x idle ({idle:.1f} ns): the load threads may not saturate memory"
                )
        rising, lowest = [], None  # (bandwidth, delay) lowest so far, at smaller delays
        for p in series:
            if not p.bandwidth_mb_s:
                continue
            if lowest and p.bandwidth_mb_s > 1.05 * lowest[0]:
                rising.append(f"{lowest[1]}->{p.delay}")
            if lowest is None or p.bandwidth_mb_s < lowest[0]:
                lowest = (p.bandwidth_mb_s, p.delay)
        if rising:
            out.append(f"{traffic} stride {stride}: bandwidth rises as delay rises ({', '.join(rising)})")
    return out


def group_series(points: Iterable[MemPoint]) -> dict[tuple[str | None, int | None], list[MemPoint]]:
    groups: dict[tuple[str | None, int | None], list[MemPoint]] = {}
    for p in points:
        groups.setdefault((p.traffic, p.stride), []).append(p)
    return groups
