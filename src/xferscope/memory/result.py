"""What a memory sweep (or an imported MLC output) produced: ``MemPointResult``, ``MemResult``, their files,
and the sanity checks of a trustworthy curve."""

from __future__ import annotations

import csv
import io
import math
import os
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, cast

import msgspec

from xferscope import records
from xferscope.errors import FormatError
from xferscope.memory.spec import MemSpec
from xferscope.records import MemEnvironment
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


@dataclass(frozen=True)
class MemPointResult:
    """One measured point. Bandwidths in MB/s with 1 MB = 10^6 bytes; None where not measured."""

    delay: int | None
    latency_ns: float | None
    latency_min_ns: float | None
    latency_max_ns: float | None
    bandwidth_mb_s: float | None
    read_mb_s: float | None
    write_mb_s: float | None
    traffic: str  # R, W2..W10, "idle" for an idle-latency point, "curve" for a cache-level curve point
    stride: int | None
    backend: str
    ns_per_delay_iter: float | None = None
    windows: int = 0  # sub-windows behind the medians
    windows_short: int = 0  # of them, windows the latency thread was not running all through (left out)
    locality: str | None = None  # how the latency chase moved: '64-page', 'whole-buffer', 'mlc random', ...
    locality_bytes: int | None = None  # its window in bytes (None: the whole buffer, or not known)
    size_bytes: int | None = None  # the chased working set (the curve's x; the latency buffer otherwise)
    cpu_node: int | None = None  # matrix cells: the NUMA node of the CPUs that measured
    mem_node: int | None = None  # matrix cells: the NUMA node of the memory

    def csv_row(self) -> list[str]:
        return [
            _cell(self.delay, "{}"),
            _cell(self.latency_ns, "{:.2f}"),
            _cell(self.bandwidth_mb_s, "{:.1f}"),
            _cell(self.read_mb_s, "{:.1f}"),
            _cell(self.write_mb_s, "{:.1f}"),
            self.traffic,
            _cell(self.stride, "{}"),
            self.backend,
            self.locality or "",
            _cell(self.size_bytes, "{}"),
            _cell(self.cpu_node, "{}"),
            _cell(self.mem_node, "{}"),
        ]

    @property
    def in_matrix(self) -> bool:
        return self.cpu_node is not None


def _cell(value: Any, fmt: str) -> str:
    return "" if value is None else fmt.format(value)


@dataclass
class MemResult:
    """Everything one sweep (or one imported MLC output) produced."""

    points: list[MemPointResult] = field(default_factory=list)
    backend: str = "builtin"
    thp_coverage: float | None = None  # fraction of the buffers backed by huge pages (of any kind)
    warnings: list[str] = field(default_factory=list)
    environment: MemEnvironment = field(default_factory=lambda: MemEnvironment())
    cancelled: bool = False
    spec: MemSpec | None = None
    pages: str | None = None  # the page size asked for: 4k, thp, 2m, 1g (None: not known)
    pages_obtained: dict[str, float] = field(default_factory=dict)  # {"4K": 0.02, "2M": 0.98}: resident shares
    notes: list[str] = field(default_factory=list)  # facts printed under the tables (not warnings)
    source: str | None = None  # the file an imported result came from
    error: str | None = None  # why the sweep ended early (its engine failed or died): the points are what it measured

    # -- the kinds of points

    @property
    def idle_points(self) -> list[MemPointResult]:
        """Idle latency (outside a NUMA matrix): the chosen locality first, then the whole buffer."""
        return [p for p in self.points if p.traffic == IDLE and not p.in_matrix]

    def _idle(self, whole: bool) -> MemPointResult | None:
        idle = [p for p in self.idle_points if p.latency_ns is not None]
        if not idle:
            local = [p for p in self.points if p.traffic == IDLE and p.in_matrix and p.cpu_node == p.mem_node]
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

    @property
    def idle_latency_ns(self) -> float | None:
        point = self._idle(False)
        return point.latency_ns if point else None

    @property
    def idle_locality(self) -> str | None:
        point = self._idle(False)
        return point.locality if point else None

    @property
    def whole_idle_latency_ns(self) -> float | None:
        """The whole-buffer idle latency measured beside a windowed one (None when there is no such pair)."""
        point = self._idle(True)
        return point.latency_ns if point else None

    @property
    def curve_points(self) -> list[MemPointResult]:
        """Loaded-latency and peak-bandwidth points (neither idle, nor the cache curve, nor a matrix cell)."""
        return [p for p in self.points if p.traffic not in (IDLE, CURVE) and not p.in_matrix]

    @property
    def loaded_points(self) -> list[MemPointResult]:
        return [p for p in self.curve_points if p.latency_ns is not None]

    @property
    def peak_points(self) -> list[MemPointResult]:
        return [p for p in self.curve_points if p.latency_ns is None]

    @property
    def cache_curve(self) -> list[MemPointResult]:
        return [p for p in self.points if p.traffic == CURVE]

    @property
    def matrix_points(self) -> list[MemPointResult]:
        return [p for p in self.points if p.in_matrix]

    def matrix(self) -> records.NumaMatrix | None:
        """The NUMA matrix: node numbers, latency_ns[cpu node][memory node], bandwidth_mb_s likewise (None where
        not measured); None when the result has no matrix cells."""
        cells = [
            (p, p.cpu_node, p.mem_node) for p in self.matrix_points if p.cpu_node is not None and p.mem_node is not None
        ]
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

    @property
    def name(self) -> str:
        """How the result is named beside others: 'builtin', 'mlc', 'mlc (imported from FILE)'."""
        if self.source:
            return f"{self.backend} ({os.path.basename(self.source)})"
        return self.backend

    def to_record(self) -> records.MemSweep:
        """The sweep as ``mem --json`` writes it."""
        caches = self.environment.get("caches") or []
        return records.MemSweep(
            schema_version=records.SCHEMA_VERSION,
            **records.same_fields(self, MEM_FIELDS),
            mode=self.spec.mode if self.spec else None,
            incomplete=self.error is not None,
            idle_latency_ns=self.idle_latency_ns,
            idle_locality=self.idle_locality,
            whole_idle_latency_ns=self.whole_idle_latency_ns,
            matrix=self.matrix(),
            cache_levels=cache_plateaus(self.cache_curve, caches) if self.cache_curve else None,
            source=self.source,
            spec=None if self.spec is None else asdict(self.spec),
            points=[records.MemPoint(**asdict(p)) for p in self.points],
        )


#: what a memory sweep's record and its result hold alike, name for name
MEM_FIELDS = (
    "backend",
    "cancelled",
    "error",
    "thp_coverage",
    "pages",
    "pages_obtained",
    "notes",
    "warnings",
    "environment",
)


def result_from_record(rec: records.MemSweep, where: str) -> MemResult:
    """A MemResult from its typed record (``mem --json``, ``import mlc --json``); FormatError for a point
    without a traffic type."""
    points = []
    for p in rec.points:
        if p.traffic is None:
            raise FormatError(where, None, "a memory point without a traffic type")
        values = msgspec.structs.asdict(p)
        values["backend"] = p.backend or rec.backend
        points.append(MemPointResult(**values))
    spec = None
    if rec.spec is not None:
        known = {f.name for f in fields(MemSpec)}
        raw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in rec.spec.items() if k in known}
        try:
            spec = MemSpec(**raw)
        except TypeError:
            spec = None
    return MemResult(points=points, **records.same_fields(rec, MEM_FIELDS), spec=spec, source=rec.source or where)


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


def csv_text(result: MemResult) -> str:
    """One row per point, columns CSV_COLUMNS (what ``mem --csv`` writes)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for point in result.points:
        writer.writerow(point.csv_row())
    return out.getvalue()


def result_json(result: MemResult) -> str:
    return records.json_text(result.to_record())


# ------------------------------------------------------------ the cache curve


#: consecutive working sets whose latencies are within this factor of their run's median form one plateau
PLATEAU_BAND = 1.25
#: a plateau higher than the one below by at least this factor "rises"
PLATEAU_RISE = 1.2


def cache_plateaus(points: Iterable[MemPointResult], caches: Iterable[records.CacheSize]) -> list[records.Plateau]:
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


def sanity_warnings(points: list[MemPointResult]) -> list[str]:
    """The checks of a trustworthy curve; each is a warning, never a failure."""
    out: list[str] = []
    idle_of: dict[tuple[int | None, str | None], float] = {}
    for p in points:
        if p.traffic != IDLE or p.in_matrix or not p.latency_ns:
            continue
        idle_of.setdefault((p.stride, p.locality), p.latency_ns)
        if not IDLE_RANGE_NS[0] <= p.latency_ns <= IDLE_RANGE_NS[1]:
            where = f"stride {p.stride}" + (f", {p.locality}" if p.locality else "")
            out.append(
                f"idle latency {p.latency_ns:.1f} ns ({where}) is outside the 60-200 ns usual for DRAM: "
                "the buffer may fit in cache, or the memory is remote or slow"
            )
    for (traffic, stride), series in group_series(p for p in points if not p.in_matrix).items():
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


def group_series(points: Iterable[MemPointResult]) -> dict[tuple[str, int | None], list[MemPointResult]]:
    groups: dict[tuple[str, int | None], list[MemPointResult]] = {}
    for p in points:
        groups.setdefault((p.traffic, p.stride), []).append(p)
    return groups
