"""What the memory sweeps need to know about this machine: CPUs, caches, pages, memory.

Everything here reads the kernel's files (sysfs, procfs) and nothing else; no
module of the mem family above it knows where they live.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from xferscope.errors import SpecError


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """'1-3,8' -> (1, 2, 3, 8)."""
    cpus: list[int] = []
    for part in [p for p in str(text).replace(" ", "").split(",") if p]:
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise SpecError("cpus", f"{part!r} is not a CPU or range; write CPUs like 1-15 or 2,4,6")
        lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
        if hi < lo:
            raise SpecError("cpus", f"{part!r} runs backwards; write the lower CPU first")
        cpus.extend(range(lo, hi + 1))
    return tuple(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """(1, 2, 3, 8) -> '1-3,8'."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def allowed_cpus() -> tuple[int, ...]:
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return tuple(range(os.cpu_count() or 1))


SYSFS = "/sys"
#: the kernel's base page (what "page" and multichase's default locality are counted in)
BASE_PAGE = os.sysconf("SC_PAGESIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class CacheLevel:
    """One data cache of a CPU, from sysfs: L1d, L2, L3."""

    level: int
    size: int
    shared_cpus: str = ""

    @property
    def name(self) -> str:
        return f"L{self.level}" + ("d" if self.level == 1 else "")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return None


def cache_levels(cpu: int = 0, sysfs: str = SYSFS) -> list[CacheLevel]:
    """The data and unified caches ``cpu`` sees, smallest level first; [] where sysfs does not say."""
    base = f"{sysfs}/devices/system/cpu/cpu{cpu}/cache"
    try:
        entries = sorted(e for e in os.listdir(base) if e.startswith("index"))
    except OSError:
        return []
    levels: dict[int, CacheLevel] = {}
    for entry in entries:
        level, kind, size = (_read(f"{base}/{entry}/{name}") for name in ("level", "type", "size"))
        if kind not in ("Unified", "Data") or not level or not size:
            continue
        try:
            found = CacheLevel(int(level), _sysfs_size(size), _read(f"{base}/{entry}/shared_cpu_list") or "")
        except ValueError:
            continue
        levels.setdefault(found.level, found)
    return [levels[k] for k in sorted(levels)]


def llc_bytes(sysfs: str = SYSFS) -> int | None:
    """Size of the last-level cache seen by CPU 0, from sysfs."""
    levels = cache_levels(0, sysfs)
    return levels[-1].size if levels else None


def _sysfs_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if not match:
        raise ValueError(text)
    return int(match.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)]


@dataclass(frozen=True)
class NumaNode:
    """A NUMA node: its CPUs (those this process may use) and whether it holds memory."""

    node: int
    cpus: tuple[int, ...]
    memory: bool = True


def numa_topology(sysfs: str = SYSFS, usable: Iterable[int] | None = None) -> list[NumaNode]:
    """The NUMA nodes from ``sysfs`` with the CPUs of each this process may use; one node holding every usable
    CPU where sysfs says nothing (a kernel without NUMA)."""
    usable = set(allowed_cpus() if usable is None else usable)
    base = f"{sysfs}/devices/system/node"
    try:
        names = sorted(int(n[4:]) for n in os.listdir(base) if n.startswith("node") and n[4:].isdigit())
    except OSError:
        names = []
    if not names:
        return [NumaNode(0, tuple(sorted(usable)))]
    with_memory = _read(f"{base}/has_memory")
    memory = set(parse_cpu_list(with_memory)) if with_memory else set(names)
    nodes = []
    for n in names:
        try:
            cpus = parse_cpu_list(_read(f"{base}/node{n}/cpulist") or "")
        except SpecError:
            cpus = ()
        nodes.append(NumaNode(n, tuple(c for c in cpus if c in usable), n in memory))
    return nodes


@dataclass(frozen=True)
class HugePool:
    """The kernel's reserved hugetlbfs pages of one size."""

    page_bytes: int
    total: int
    free: int


def huge_pool(page_bytes: int, sysfs: str = SYSFS) -> HugePool | None:
    """The hugetlbfs pool of ``page_bytes`` pages; None where the kernel has no such size."""
    base = f"{sysfs}/kernel/mm/hugepages/hugepages-{page_bytes // 1024}kB"
    total, free = _read(f"{base}/nr_hugepages"), _read(f"{base}/free_hugepages")
    if total is None or free is None:
        return None
    try:
        return HugePool(page_bytes, int(total), int(free))
    except ValueError:
        return None


def thp_mode(sysfs: str = SYSFS) -> str | None:
    text = _read(f"{sysfs}/kernel/mm/transparent_hugepage/enabled")
    match = re.search(r"\[(\w+)\]", text or "")
    return match.group(1) if match else None


def available_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # psutil missing or unreadable /proc: no check, not a failure
        return None


def _overlapping_vmas(regions: Iterable[tuple[int, int]], path: str):
    """Yield (head line, {field: kB}) of each mapping in an smaps-like file that overlaps ``regions``."""
    spans = [(start, start + size) for start, size in regions]
    head: str | None = None
    fields: dict[str, int] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            match = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
            if match:
                if head is not None:
                    yield head, fields
                lo, hi = int(match.group(1), 16), int(match.group(2), 16)
                head = line if any(lo < end and hi > start for start, end in spans) else None
                fields = {}
            elif head is not None:
                key, _, rest = line.partition(":")
                value = rest.split()
                if value and value[0].isdigit():
                    fields[key] = int(value[0])
    if head is not None:
        yield head, fields


def pages_obtained(regions: Iterable[tuple[int, int]], smaps: str = "/proc/self/smaps") -> dict[int, int]:
    """Resident bytes of the mappings holding ``regions``, by page size: {4096: .., 2097152: .., 1073741824: ..}."""
    out: dict[int, int] = {}
    try:
        for _, f in _overlapping_vmas(list(regions), smaps):
            page = f.get("KernelPageSize", 4) * 1024
            hugetlb = (f.get("Private_Hugetlb", 0) + f.get("Shared_Hugetlb", 0)) * 1024
            if hugetlb:
                out[page] = out.get(page, 0) + hugetlb
                continue
            thp = f.get("AnonHugePages", 0) * 1024
            rss = f.get("Rss", 0) * 1024
            if thp:
                out[2 << 20] = out.get(2 << 20, 0) + thp
            if rss - thp > 0:
                out[page] = out.get(page, 0) + rss - thp
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in out.items() if v}


def thp_coverage(regions: Iterable[tuple[int, int]], smaps: str = "/proc/self/smaps") -> float | None:
    """Fraction of the resident bytes of the mappings holding ``regions`` that sit on huge pages."""
    got = pages_obtained(regions, smaps)
    total = sum(got.values())
    return sum(v for k, v in got.items() if k > BASE_PAGE) / total if total else None


def nodes_obtained(
    regions: Iterable[tuple[int, int]], maps: str = "/proc/self/maps", numa_maps: str = "/proc/self/numa_maps"
) -> dict[int, int]:
    """Pages of the mappings holding ``regions`` on each NUMA node, from numa_maps: {node: pages}."""
    spans = [(start, start + size) for start, size in regions]
    starts = set()
    out: dict[int, int] = {}
    try:
        with open(maps, encoding="utf-8") as fh:
            for line in fh:
                match = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
                if match:
                    lo, hi = int(match.group(1), 16), int(match.group(2), 16)
                    if any(lo < end and hi > start for start, end in spans):
                        starts.add(lo)
        with open(numa_maps, encoding="utf-8") as fh:
            for line in fh:
                words = line.split()
                if not words or not re.fullmatch(r"[0-9a-f]+", words[0]) or int(words[0], 16) not in starts:
                    continue
                for word in words[1:]:
                    match = re.fullmatch(r"N(\d+)=(\d+)", word)
                    if match:
                        out[int(match.group(1))] = out.get(int(match.group(1)), 0) + int(match.group(2))
    except OSError:
        return {}
    return out
