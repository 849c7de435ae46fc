"""A memory sweep's spec resolved against this machine: which CPUs, how much memory, which windows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from xferscope.engines.mem_machine import allowed_cpus, available_memory, format_cpu_list, llc_bytes
from xferscope.engines.mem_spec import GIB, HUGE_PAGE, MIB, MemSpec
from xferscope.errors import EnvironmentProblem, SpecError


@dataclass(frozen=True)
class MemPlan:
    """The spec resolved against this machine: CPUs, buffer sizes, windows."""

    latency_cpu: int | None
    load_cpus: tuple[int, ...]
    chase_bytes: int
    load_bytes: int
    warmup_s: float
    window_s: float
    windows: int
    llc_bytes: int | None
    notes: tuple[str, ...] = ()


def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def sub_windows(point_seconds: float) -> tuple[float, float, int]:
    """(warm-up, window, count): about 0.1 s windows, 3 to 10 of them; the warm-up is dropped."""
    count = max(3, min(10, round(point_seconds / 0.1)))
    return min(0.1, point_seconds / 4), point_seconds / count, count


def buffers_per_load_thread(traffic: Iterable[str]) -> int:
    needs = set()
    for name in traffic:
        if name != "W6":
            needs.add("rd0")
        if name == "W10":
            needs.add("rd1")
        if name not in ("R", "W5"):
            needs.add("wr")
    return len(needs)


def resolve_plan(spec: MemSpec) -> MemPlan:
    allowed = allowed_cpus()
    notes: list[str] = []
    if spec.mode == "peak":
        latency_cpu = None
        load = spec.cpus or allowed
    else:
        if spec.latency_cpu is not None:
            latency_cpu = spec.latency_cpu
        else:
            free = [c for c in allowed if not spec.cpus or c not in spec.cpus]
            latency_cpu = free[0] if free else allowed[0]
        load = spec.cpus or tuple(c for c in allowed if c != latency_cpu)
    if spec.mode == "idle":
        load = ()
    if spec.threads is not None and spec.mode != "idle":
        if spec.threads > len(load):
            free = format_cpu_list(load) or "none"
            raise SpecError("threads", f"{spec.threads} load threads asked but only {len(load)} CPU(s) are free "
                                       f"for them ({free}); ask for at most {len(load)}")
        load = tuple(load[: spec.threads])
    if spec.mode == "loaded" and not load:
        raise EnvironmentProblem("loaded latency needs a CPU for the latency thread and at least one more for "
                                 f"load threads; this process may use {format_cpu_list(allowed)}")

    llc = llc_bytes()
    if spec.buffer_bytes is not None:
        chase = load_bytes = spec.buffer_bytes
    else:
        chase = max(GIB, 4 * (llc or 0))
        load_bytes = max(64 * MIB, _round_up(4 * (llc or 0) // max(1, len(load)), HUGE_PAGE))
    chase -= chase % max(spec.strides)
    load_bytes -= load_bytes % max(spec.strides)
    if spec.mode == "peak":
        chase = 0

    need = chase + len(load) * buffers_per_load_thread(spec.traffic) * load_bytes
    avail = available_memory()
    if avail is not None and need > 0.8 * avail:
        raise EnvironmentProblem(f"the sweep needs {need / GIB:.1f} GiB of buffers and {avail / GIB:.1f} GiB is "
                                 "available; pass a smaller --buffer or fewer --threads")
    if llc and chase and chase < 4 * llc:
        notes.append(f"the latency buffer ({chase / MIB:.0f} MiB) is smaller than 4x the last-level cache "
                     f"({llc / MIB:.0f} MiB): latency may come partly from cache; use --buffer {_round_up(4 * llc, GIB) // GIB}G")
    warmup, window, count = sub_windows(spec.point_seconds)
    return MemPlan(latency_cpu if spec.mode != "peak" else None, tuple(load), chase, load_bytes, warmup, window,
                   count, llc, tuple(notes))
