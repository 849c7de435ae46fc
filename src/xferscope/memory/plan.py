"""A memory sweep's spec resolved against this machine: which CPUs, how much memory, which windows."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from xferscope.errors import EnvironmentProblem, SpecError
from xferscope.memory.machine import (
    CacheLevel,
    NumaNode,
    allowed_cpus,
    available_memory,
    cache_levels,
    format_cpu_list,
    huge_pool,
    numa_topology,
)
from xferscope.memory.spec import GIB, HUGE_PAGE, MIB, PAGE_SIZE_TEXT, MemSpec, locality_bytes

HUGETLB_PAGE = {"2m": 2 * MIB, "1g": GIB}
CURVE_MIN = 4 << 10  # the curve starts at 4 KiB, like lmbench's lat_mem_rd


@dataclass(frozen=True)
class MatrixCell:
    """One cell of the NUMA matrix: threads on ``cpu_node``'s CPUs, memory on ``mem_node``."""

    cpu_node: int
    mem_node: int
    latency_cpu: int
    load_cpus: tuple[int, ...]
    touch_cpu: int  # a CPU of mem_node that allocates and touches the memory (-1: mem_node has no CPU here)


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
    caches: tuple[CacheLevel, ...] = ()
    curve_sizes: tuple[int, ...] = ()
    matrix: tuple[MatrixCell, ...] = ()
    topology: tuple[NumaNode, ...] = field(default=())

    def window_for(self, spec: MemSpec, stride: int, buffer: int) -> int:
        """The chase window for ``stride`` over ``buffer`` bytes: 0 for the whole buffer."""
        window = locality_bytes(spec.locality)
        if window is None:
            return 0
        window -= window % stride
        return 0 if window >= buffer else window


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


def curve_sizes(smallest: int, largest: int, per_octave: int, stride: int) -> tuple[int, ...]:
    """Working-set sizes from ``smallest`` to ``largest``, ``per_octave`` per doubling (lmbench's sub-octave steps),
    each a multiple of 16 strides (and of 4 KiB from 64 KiB up)."""
    out: list[int] = []
    steps = max(1, math.ceil(math.log2(largest / smallest) * per_octave))
    for k in range(steps + 1):
        size = smallest * 2 ** (k / per_octave)
        unit = 4096 if size >= 64 << 10 else 16 * stride
        size = max(unit, round(size / unit) * unit)
        if size <= largest and (not out or size > out[-1]):
            out.append(size)
    return tuple(out)


def curve_sizes_for(spec: MemSpec, llc: int | None) -> tuple[int, ...]:
    """The curve's working sets: 4 KiB to ``spec.max_size`` (default 8x the last-level cache, at least 64 MiB)."""
    largest = spec.max_size or max(64 * MIB, 8 * (llc or 0))
    return curve_sizes(CURVE_MIN, largest, spec.per_octave, max(spec.strides))


def matrix_cells(topology: list[NumaNode], spec: MemSpec, threads: int | None) -> tuple[MatrixCell, ...]:
    """Every (CPU node, memory node) pair where the CPU node has CPUs this process may use and the memory
    node holds memory."""
    cells = []
    for cpu_node in topology:
        cpus = tuple(c for c in cpu_node.cpus if spec.cpus is None or c in spec.cpus)
        if not cpus:
            continue
        latency = spec.latency_cpu if spec.latency_cpu in cpus else cpus[0]
        load = cpus[:threads] if threads else cpus
        for mem_node in topology:
            if not mem_node.memory:
                continue
            touch = mem_node.cpus[0] if mem_node.cpus else -1
            cells.append(MatrixCell(cpu_node.node, mem_node.node, latency, load, touch))
    return tuple(cells)


def check_huge_pool(spec: MemSpec, buffers: Iterable[int]) -> None:
    """Fail before measuring when hugetlbfs pages were asked for and too few are reserved."""
    page = HUGETLB_PAGE.get(spec.pages)
    if page is None:
        return
    need = sum(-(-b // page) for b in buffers if b)
    pool = huge_pool(page, spec.sysfs)
    if pool is None:
        raise EnvironmentProblem(f"--pages {spec.pages}: this kernel offers no {PAGE_SIZE_TEXT[spec.pages]}")
    if pool.free < need:
        path = f"{spec.sysfs}/kernel/mm/hugepages/hugepages-{page // 1024}kB/nr_hugepages"
        raise EnvironmentProblem(
            f"--pages {spec.pages} needs {need} free {PAGE_SIZE_TEXT[spec.pages]} and "
            f"{pool.free} of {pool.total} reserved are free; reserve them as root "
            f"(echo {pool.total - pool.free + need} > {path}) or use --pages thp"
        )


def _cpus(spec: MemSpec, allowed: tuple[int, ...]) -> tuple[int | None, tuple[int, ...]]:
    """(the latency thread's CPU, the load threads' CPUs) for this mode; SpecError or EnvironmentProblem where
    the CPUs this process may use cannot hold them."""
    if spec.mode == "peak":
        latency_cpu = None
        load = tuple(spec.cpus or allowed)
    else:
        if spec.latency_cpu is not None:
            latency_cpu = spec.latency_cpu
        else:
            free = [c for c in allowed if not spec.cpus or c not in spec.cpus]
            latency_cpu = free[0] if free else allowed[0]
        load = tuple(spec.cpus or (c for c in allowed if c != latency_cpu))
    if spec.mode in ("idle", "curve"):
        load = ()
    if spec.threads is not None and spec.mode in ("loaded", "peak"):
        if spec.threads > len(load):
            free_text = format_cpu_list(load) or "none"
            raise SpecError(
                "threads",
                f"{spec.threads} load threads asked but only {len(load)} CPU(s) are free "
                f"for them ({free_text}); ask for at most {len(load)}",
            )
        load = load[: spec.threads]
    if spec.mode == "loaded" and not load:
        raise EnvironmentProblem(
            "loaded latency needs a CPU for the latency thread and at least one more for "
            f"load threads; this process may use {format_cpu_list(allowed)}"
        )
    return latency_cpu, load


def resolve_plan(spec: MemSpec) -> MemPlan:
    allowed = allowed_cpus()
    notes: list[str] = []
    latency_cpu, load = _cpus(spec, tuple(allowed))

    caches = tuple(cache_levels(latency_cpu if latency_cpu is not None else allowed[0], spec.sysfs))
    llc = caches[-1].size if caches else None
    topology: tuple[NumaNode, ...] = ()
    cells: tuple[MatrixCell, ...] = ()
    if spec.mode == "matrix":
        topology = tuple(numa_topology(spec.sysfs, allowed))
        cells = matrix_cells(list(topology), spec, spec.threads)
        if not cells:
            raise EnvironmentProblem(
                f"no NUMA node has both CPUs this process may use ({format_cpu_list(allowed)}) and memory to measure"
            )
        load = max((c.load_cpus for c in cells), key=len)
    if spec.buffer_bytes is not None:
        chase = load_bytes = spec.buffer_bytes
    else:
        chase = max(GIB, 4 * (llc or 0))
        load_bytes = max(64 * MIB, _round_up(4 * (llc or 0) // max(1, len(load)), HUGE_PAGE))
    chase -= chase % max(spec.strides)
    load_bytes -= load_bytes % max(spec.strides)
    sizes: tuple[int, ...] = ()
    if spec.mode == "curve":
        sizes = curve_sizes_for(spec, llc)
        chase = sizes[-1]
    if spec.mode == "peak":
        chase = 0

    need = chase + len(load) * buffers_per_load_thread(spec.traffic_types) * load_bytes
    avail = available_memory()
    if avail is not None and need > 0.8 * avail:
        raise EnvironmentProblem(
            f"the sweep needs {need / GIB:.1f} GiB of buffers and {avail / GIB:.1f} GiB is "
            "available; pass a smaller --buffer or fewer --threads"
        )
    loads = [load_bytes] * (len(load) * buffers_per_load_thread(spec.traffic_types))
    check_huge_pool(spec, ([chase] if spec.mode != "curve" else []) + (loads if spec.mode != "matrix" else []))
    if llc and chase and chase < 4 * llc and spec.mode != "curve":
        notes.append(
            f"the latency buffer ({chase / MIB:.0f} MiB) is smaller than 4x the last-level cache "
            f"({llc / MIB:.0f} MiB): latency may come partly from cache; use --buffer {_round_up(4 * llc, GIB) // GIB}G"
        )
    warmup, window, count = sub_windows(spec.seconds_per_point)
    return MemPlan(
        latency_cpu if spec.mode != "peak" else None,
        tuple(load),
        chase,
        load_bytes,
        warmup,
        window,
        count,
        llc,
        tuple(notes),
        caches,
        sizes,
        cells,
        topology,
    )
