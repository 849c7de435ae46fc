"""The memory-sweep form and the tables beside the chart (MLC's loaded-latency rows, the max-bandwidth table,
the cache-level curve with its cache sizes, the NUMA matrix, several results side by side), without Textual.
Needs ``xferscope.memory.sweep``."""

from __future__ import annotations

from dataclasses import dataclass

from xferscope.errors import SpecError
from xferscope.units import format_size, parse_duration, parse_size

#: SpecError field -> memory form control
MEM_FIELD_CONTROL = {
    "mode": "mem-mode",
    "traffic": "mem-traffic",
    "stride": "mem-stride",
    "delays": "mem-delays",
    "point_seconds": "mem-seconds",
    "threads": "mem-threads",
    "buffer": "mem-buffer",
    "cpus": "mem-threads",
    "latency_cpu": "mem-threads",
    "backend": "mem-mode",
    "locality": "mem-locality",
    "pages": "mem-pages",
    "max_size": "mem-buffer",
    "per_octave": "mem-mode",
}
TABLE_HEADERS = ("Inject Delay", "Latency (ns)", "Bandwidth (MB/sec)")


@dataclass
class MemFormValues:
    mode: str = "loaded"
    traffic: str = ""  # empty: the mode's default (R; peak: MLC's five max-bandwidth rows)
    stride: str = "64"
    delays: str = ""  # empty: MLC's default list
    seconds: str = "0.5"
    threads: str = ""  # empty: every CPU but the latency thread's
    buffer: str = ""  # empty: from the last-level cache size (curve: the largest working set)
    locality: str = "default"  # multichase's -T: default (64 pages), page, whole, or a size
    pages: str = "thp"

    @classmethod
    def from_spec(cls, spec) -> MemFormValues:
        from xferscope.memory.sweep import DEFAULT_DELAYS

        size = spec.max_size if spec.mode == "curve" else spec.buffer_bytes
        locality = spec.locality if not spec.locality.isdigit() else format_size(int(spec.locality))
        from xferscope.memory.spec import PEAK_TRAFFIC

        default = PEAK_TRAFFIC if spec.mode == "peak" else ("R",)
        traffic = "" if tuple(spec.traffic) == default else ",".join(spec.traffic)
        return cls(
            mode=spec.mode,
            traffic=traffic,
            stride=",".join(map(str, spec.strides)),
            delays="" if tuple(spec.delays) == DEFAULT_DELAYS else ",".join(map(str, spec.delays)),
            seconds=f"{spec.point_seconds:g}",
            threads="" if spec.threads is None else str(spec.threads),
            buffer="" if size is None else format_size(size),
            locality=locality,
            pages=spec.pages,
        )


def build_mem_spec(values: MemFormValues):
    """A validated MemSpec; SpecError names the field."""
    from xferscope.memory.sweep import DEFAULT_DELAYS, MemSpec, parse_int_list

    try:
        seconds = parse_duration(values.seconds)
    except ValueError as exc:
        raise SpecError("point_seconds", str(exc)) from None
    try:
        buffer = parse_size(values.buffer) if values.buffer.strip() else None
    except ValueError as exc:
        raise SpecError("buffer", str(exc)) from None
    threads = values.threads.strip()
    if threads and not threads.isdigit():
        raise SpecError("threads", f"not a whole number: {threads!r}")
    traffic = tuple(t.strip() for t in values.traffic.split(",") if t.strip())
    curve = values.mode == "curve"
    spec = MemSpec(
        mode=values.mode,
        traffic=traffic or None,
        strides=parse_int_list(values.stride, "stride"),
        delays=parse_int_list(values.delays, "delays") if values.delays.strip() else DEFAULT_DELAYS,
        point_seconds=seconds,
        threads=int(threads) if threads else None,
        buffer_bytes=None if curve else buffer,
        max_size=buffer if curve else None,
        locality=values.locality.strip() or "default",
        pages=values.pages.strip() or "thp",
    )
    return spec.validated()


def series_key(point) -> str:
    """'R stride 64', 'W6 stride 256', 'idle stride 64'."""
    return f"{point.traffic} stride {point.stride}" if point.stride else point.traffic


def mlc_row(point) -> tuple[str, str, str]:
    """The row MLC prints: delay as 5 digits, latency in ns, bandwidth in MB/s (10^6 B)."""
    delay = "-" if point.delay is None else f"{point.delay:05d}"
    lat = "-" if point.latency_ns is None else f"{point.latency_ns:.2f}"
    bw = "-" if point.bandwidth_mb_s is None else f"{point.bandwidth_mb_s:.1f}"
    return delay, lat, bw


def peak_rows(points) -> list[tuple[str, str]]:
    """The max-bandwidth table: MLC's label of each traffic type and its MB/s."""
    from xferscope.memory.report import TRAFFIC_LABELS

    return [
        (TRAFFIC_LABELS.get(p.traffic, p.traffic), f"{p.bandwidth_mb_s:.1f}")
        for p in points
        if p.bandwidth_mb_s is not None
    ]


def curve_rows(points, caches) -> list[tuple[str, str, str]]:
    """The cache-level curve: working set, latency, the cache it fits in; a marker row at each sysfs size."""
    out: list[tuple[str, str, str]] = []
    marks = sorted(caches or [], key=lambda c: c["size"])

    def mark_up_to(size: int) -> None:  # a marker row for each cache no larger than ``size`` not yet marked
        while marks and size >= marks[0]["size"]:
            out.append((f"── {marks[0]['name']}", format_size(marks[0]["size"]), "sysfs ──"))
            marks.pop(0)

    for p in sorted(points, key=lambda p: p.size_bytes or 0):
        mark_up_to((p.size_bytes or 0) - 1)  # the caches smaller than this working set, above its row
        level = next(
            (str(c["name"]) for c in sorted(caches or [], key=lambda c: c["size"]) if (p.size_bytes or 0) <= c["size"]),
            "memory" if caches else "",
        )
        out.append((format_size(p.size_bytes or 0), f"{p.latency_ns:.2f}", level))
    if out:
        mark_up_to(max(p.size_bytes or 0 for p in points))  # a cache the curve ends at is marked below its row
    return out


def matrix_rows(points) -> tuple[list[str], list[tuple[str, ...]]]:
    """The NUMA matrix: headers (memory nodes), then latency rows and read-bandwidth rows per CPU node."""
    from xferscope.memory.result import numa_matrix

    matrix = numa_matrix(points)
    if not matrix:
        return [], []
    headers = ["CPU node", *(f"mem {n}" for n in matrix["mem_nodes"])]
    rows: list[tuple[str, ...]] = []
    for key, what, fmt in (("latency_ns", "ns", "{:.1f}"), ("bandwidth_mb_s", "MB/s", "{:.0f}")):
        for node, row in zip(matrix["cpu_nodes"], matrix.get(key) or []):
            rows.append((f"{node} ({what})", *("-" if v is None else fmt.format(v) for v in row)))
    return headers, rows


def idle_note(points) -> str:
    """'idle latency 185.8 ns (64-page locality; whole-buffer 655.3 ns)' from the idle points so far."""
    from xferscope.memory.result import idle_point, idle_points
    from xferscope.memory.spec import locality_text

    if not any(p.latency_ns is not None for p in idle_points(points)):
        return ""
    first, whole = idle_point(points), idle_point(points, whole=True)
    assert first is not None and first.latency_ns is not None
    inside = locality_text(first.locality)
    if whole is not None:
        inside += f"; whole-buffer {whole.latency_ns:.1f} ns"
    return f"idle latency {first.latency_ns:.1f} ns" + (f" ({inside})" if inside else "")


def load_mem_file(path: str):
    """Memory results in ``path`` (mem --json, import mlc --json, mlc's text); XferscopeError when it holds
    none."""
    from xferscope.importers.mlc import read_mem_results

    return read_mem_results(path)
