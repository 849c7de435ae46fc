"""What a memory sweep (or an imported MLC output) produced: ``MemPoint``, ``MemResult``, their files,
and the sanity checks of a trustworthy curve."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from xferscope.engines.mem_spec import MemSpec

CSV_COLUMNS = ("delay", "latency_ns", "bandwidth_mb_s", "read_mb_s", "write_mb_s", "traffic", "stride", "backend")
IDLE = "idle"  # the traffic label of an idle-latency point


@dataclass(frozen=True)
class MemPoint:
    """One measured point. Bandwidths in MB/s with 1 MB = 10^6 bytes; None where not measured."""

    delay: int | None
    latency_ns: float | None
    latency_min_ns: float | None
    latency_max_ns: float | None
    bandwidth_mb_s: float | None
    read_mb_s: float | None
    write_mb_s: float | None
    traffic: str  # R, W2..W10, or "idle" for an idle-latency point
    stride: int | None
    backend: str
    ns_per_delay_iter: float | None = None
    windows: int = 0  # sub-windows behind the medians

    def csv_row(self) -> list[str]:
        return [_cell(self.delay, "{}"), _cell(self.latency_ns, "{:.2f}"), _cell(self.bandwidth_mb_s, "{:.1f}"),
                _cell(self.read_mb_s, "{:.1f}"), _cell(self.write_mb_s, "{:.1f}"), self.traffic,
                _cell(self.stride, "{}"), self.backend]


def _cell(value: Any, fmt: str) -> str:
    return "" if value is None else fmt.format(value)


@dataclass
class MemResult:
    """Everything one sweep (or one imported MLC output) produced."""

    points: list[MemPoint] = field(default_factory=list)
    backend: str = "builtin"
    thp_coverage: float | None = None  # fraction of the buffers backed by huge pages
    warnings: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    cancelled: bool = False
    spec: MemSpec | None = None

    @property
    def idle_points(self) -> list[MemPoint]:
        return [p for p in self.points if p.traffic == IDLE]

    @property
    def idle_latency_ns(self) -> float | None:
        idle = self.idle_points
        return idle[0].latency_ns if idle else None

    @property
    def curve_points(self) -> list[MemPoint]:
        return [p for p in self.points if p.traffic != IDLE]

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "cancelled": self.cancelled,
            "idle_latency_ns": self.idle_latency_ns,
            "thp_coverage": self.thp_coverage,
            "warnings": list(self.warnings),
            "environment": dict(self.environment),
            "spec": None if self.spec is None else asdict(self.spec),
            "points": [asdict(p) for p in self.points],
        }


def csv_text(result: MemResult) -> str:
    """One row per point, columns CSV_COLUMNS (what ``mem --csv`` writes)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for point in result.points:
        writer.writerow(point.csv_row())
    return out.getvalue()


def result_json(result: MemResult) -> str:
    return json.dumps(result.to_dict(), indent=2)


IDLE_RANGE_NS = (60.0, 200.0)


def sanity_warnings(points: list[MemPoint]) -> list[str]:
    """The checks of a trustworthy curve; each is a warning, never a failure."""
    out: list[str] = []
    idle_by_stride = {p.stride: p.latency_ns for p in points if p.traffic == IDLE and p.latency_ns}
    for stride, idle in idle_by_stride.items():
        if not IDLE_RANGE_NS[0] <= idle <= IDLE_RANGE_NS[1]:
            out.append(f"idle latency {idle:.1f} ns (stride {stride}) is outside the 60-200 ns usual for DRAM: "
                       "the buffer may fit in cache, or the memory is remote or slow")
    for (traffic, stride), series in group_series(points).items():
        if traffic == IDLE:
            continue
        series = sorted(series, key=lambda p: p.delay or 0)
        idle = idle_by_stride.get(stride)
        lat = [p for p in series if p.latency_ns is not None]
        if idle and len(lat) >= 2:
            last = lat[-1]
            if abs(last.latency_ns - idle) > 0.05 * idle:
                out.append(f"{traffic} stride {stride}: latency at the largest delay ({last.delay}) is "
                           f"{last.latency_ns:.1f} ns, more than 5% away from idle ({idle:.1f} ns)")
            first = lat[0]
            if first.delay == 0 and first.latency_ns < 1.3 * idle:
                out.append(f"{traffic} stride {stride}: latency at delay 0 ({first.latency_ns:.1f} ns) is below "
                           f"1.3x idle ({idle:.1f} ns): the load threads may not saturate memory")
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


def group_series(points: Iterable[MemPoint]) -> dict[tuple[str, int | None], list[MemPoint]]:
    groups: dict[tuple[str, int | None], list[MemPoint]] = {}
    for p in points:
        groups.setdefault((p.traffic, p.stride), []).append(p)
    return groups
