"""The memory-sweep form and the MLC-shaped table, without Textual. Needs ``xferscope.engines.mem``."""
from __future__ import annotations

from dataclasses import dataclass

from xferscope.errors import SpecError
from xferscope.units import format_size, parse_duration, parse_size

#: SpecError field -> memory form control
MEM_FIELD_CONTROL = {"mode": "mem-mode", "traffic": "mem-traffic", "stride": "mem-stride", "delays": "mem-delays",
                     "point_seconds": "mem-seconds", "threads": "mem-threads", "buffer": "mem-buffer",
                     "cpus": "mem-threads", "latency_cpu": "mem-threads", "backend": "mem-mode"}
TABLE_HEADERS = ("Inject Delay", "Latency (ns)", "Bandwidth (MB/sec)")


@dataclass
class MemFormValues:
    mode: str = "loaded"
    traffic: str = "R"
    stride: str = "64"
    delays: str = ""     # empty: MLC's default list
    seconds: str = "0.5"
    threads: str = ""    # empty: every CPU but the latency thread's
    buffer: str = ""     # empty: from the last-level cache size

    @classmethod
    def from_spec(cls, spec) -> "MemFormValues":
        from xferscope.engines.mem import DEFAULT_DELAYS

        return cls(mode=spec.mode, traffic=",".join(spec.traffic), stride=",".join(map(str, spec.strides)),
                   delays="" if tuple(spec.delays) == DEFAULT_DELAYS else ",".join(map(str, spec.delays)),
                   seconds=f"{spec.point_seconds:g}", threads="" if spec.threads is None else str(spec.threads),
                   buffer="" if spec.buffer_bytes is None else format_size(spec.buffer_bytes))


def build_mem_spec(values: MemFormValues):
    """A validated MemSpec; SpecError names the field."""
    from xferscope.engines.mem import DEFAULT_DELAYS, MemSpec, parse_int_list

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
    spec = MemSpec(
        mode=values.mode, traffic=traffic, strides=parse_int_list(values.stride, "stride"),
        delays=parse_int_list(values.delays, "delays") if values.delays.strip() else DEFAULT_DELAYS,
        point_seconds=seconds, threads=int(threads) if threads else None, buffer_bytes=buffer)
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
