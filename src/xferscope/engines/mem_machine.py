"""What the memory sweeps need to know about this machine: CPUs, caches, pages, memory.

Everything here reads the kernel's files (sysfs, procfs) and nothing else; no
module of the mem family above it knows where they live.
"""
from __future__ import annotations

import os
import platform
import re
from typing import Iterable

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


def llc_bytes() -> int | None:
    """Size of the last-level cache seen by CPU 0, from sysfs."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    best: tuple[int, int] | None = None
    try:
        entries = os.listdir(base)
    except OSError:
        return None
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(f"{base}/{entry}/level") as fh:
                level = int(fh.read())
            with open(f"{base}/{entry}/type") as fh:
                kind = fh.read().strip()
            with open(f"{base}/{entry}/size") as fh:
                size = _sysfs_size(fh.read())
        except (OSError, ValueError):
            continue
        if kind in ("Unified", "Data") and (best is None or level > best[0]):
            best = (level, size)
    return best[1] if best else None


def _sysfs_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if not match:
        raise ValueError(text)
    return int(match.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)]


def thp_mode() -> str | None:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
            match = re.search(r"\[(\w+)\]", fh.read())
        return match.group(1) if match else None
    except OSError:
        return None


def available_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # psutil missing or unreadable /proc: no check, not a failure
        return None


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def thp_coverage(regions: Iterable[tuple[int, int]], smaps: str = "/proc/self/smaps") -> float | None:
    """Fraction of the resident bytes of the mappings holding ``regions`` that sit on huge pages."""
    spans = [(start, start + size) for start, size in regions]
    if not spans:
        return None
    rss = huge = 0
    inside = False
    try:
        with open(smaps) as fh:
            for line in fh:
                head = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
                if head:
                    lo, hi = int(head.group(1), 16), int(head.group(2), 16)
                    inside = any(lo < end and hi > start for start, end in spans)
                elif inside and line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif inside and line.startswith("AnonHugePages:"):
                    huge += int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return huge / rss if rss else None
