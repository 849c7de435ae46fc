"""Which ceiling binds a plateau: storage, PCIe, CPU, memory copies, or the path's own overhead.

Pure functions over the figures a saturation measured (``Evidence``); the rules
are the thresholds below, printed in one line (``CEILING_RULE``) under every
verdict. Nothing here measures: a ceiling that was not measured is said to be
missing, never guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xferscope.engines.split import split_advice as rule
from xferscope.units import format_size

CPU_SHARE = 0.90  # the engine's threads use 90% of the CPUs they may use
THREAD_PCT = 90.0  # one thread busy 90% of the time or more (the "one thread at 100%")
SYSTEM_PCT = 95.0  # the whole machine busy, whoever uses it
PCIE_SHARE = 0.85  # PCIe traffic at 85% of the measured pinned copy ceiling
STORAGE_SHARE = 0.90  # at 90% of the host O_DIRECT plateau: storage binds
ABOVE_STORAGE = 1.10  # through the page cache and 10% above storage: memory, not storage, is read
LITTLE_LOW, LITTLE_HIGH = 0.80, 1.25  # IOPS x latency against the concurrency set
OWN_SHARE = 0.90  # at 90% of what the path moves from the page cache (--source cache): at its own ceiling

CEILING_RULE = (
    f"bound by PCIe at >= {PCIE_SHARE:.0%} of the measured pinned copy ceiling; CPU when the engine "
    f"threads use >= {CPU_SHARE:.0%} of their CPUs, one thread >= {THREAD_PCT:.0f}% or the machine "
    f">= {SYSTEM_PCT:.0f}% busy; storage at >= {STORAGE_SHARE:.0%} of the host O_DIRECT plateau; "
    "memory copies through the page cache (above storage) or cuFile compat buffers; otherwise the "
    f"path's own overhead, held against what the path moves from the page cache (--source cache: at its own "
    f"ceiling from {OWN_SHARE:.0%} of it)"
)

KINDS = ("PCIe", "CPU", "storage", "memory copies", "path overhead", "undetermined")


@dataclass(frozen=True)
class Evidence:
    """What one path measured at one block size, and the ceilings it is held against."""

    path: str
    block_size: int
    knee: str  # "4 workers", "2 workers x qd 16"
    plateau_gib_s: float
    writes: bool = False
    storage_gib_s: float | None = None  # the host O_DIRECT plateau at this block size; None: not measured
    storage_note: str | None = None  # why it is missing, or what limits it ("itself CPU-bound")
    pcie_ceiling_gb_s: float | None = None  # measured pinned copy ceiling, summed over the GPUs used
    pcie_mb_s: float | None = None  # NVML RX (reads) or TX (writes) during the run, summed
    engine_cpu_pct: float | None = None  # the engine's threads, percent of one core
    cpus_allowed: int | None = None  # the CPUs those threads may run on
    busiest_thread_pct: float | None = None
    system_busy_pct: float | None = None
    page_cache: bool = False  # reads or writes went through the page cache
    compat: bool = False  # cuFile in compat mode: POSIX I/O through its own bounce buffers
    split: int | None = None  # each request split into sub-requests of this size (--split)
    little_ratio: float | None = None  # IOPS x mean latency / concurrency
    little_in_flight: float | None = None
    concurrency: int | None = None  # in flight across all workers (and ranks)
    unsaturated: str | None = None  # "workers", "iodepth" or both: doubling still gained at the limit
    limit: str | None = None  # "16 workers x qd 64": the most the search was allowed
    own_ceiling_gib_s: float | None = None  # the path at its plateau reading from the page cache (--source cache)
    own_ceiling_note: str | None = None  # why that was not measured


@dataclass(frozen=True)
class CeilingFinding:
    ceiling: str  # storage, PCIe, CPU, memory copies, Little
    text: str  # "97% of storage (host 3.0 GiB/s)"
    binds: bool | None  # None: not measured here


@dataclass(frozen=True)
class BottleneckFinding:
    kind: str  # one of KINDS
    detail: str  # "page cache", "one thread at 100%", ...
    checks: tuple[CeilingFinding, ...]
    advice: tuple[str, ...] = field(default=())

    @property
    def word(self) -> str:
        if self.kind == "path overhead":
            return f"{self.kind} ({self.detail})" if self.detail else self.kind
        if self.kind == "undetermined":
            return f"no measured ceiling binds ({self.detail})" if self.detail else "no measured ceiling binds"
        return f"{self.kind}-bound" + (f" ({self.detail})" if self.detail else "")


def _known(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def gib(value: float) -> str:
    return f"{value:.2f} GiB/s" if value < 10 else f"{value:.1f} GiB/s"


def storage_check(e: Evidence) -> CeilingFinding:
    if e.path == "host":
        note = f", {e.storage_note}" if e.storage_note else ""
        return CeilingFinding("storage", f"(the storage reference: host O_DIRECT{note})", None)
    if not _known(e.storage_gib_s) or not e.storage_gib_s:
        return CeilingFinding(
            "storage", f"storage not measured ({e.storage_note or 'no host plateau at this block size'})", None
        )
    share = e.plateau_gib_s / e.storage_gib_s
    note = f", {e.storage_note}" if e.storage_note else ""
    return CeilingFinding(
        "storage", f"{share:.0%} of storage (host {gib(e.storage_gib_s)}{note})", share >= STORAGE_SHARE
    )


def pcie_check(e: Evidence) -> CeilingFinding | None:
    if e.path == "host":
        return None
    if not _known(e.pcie_ceiling_gb_s) or not e.pcie_ceiling_gb_s:
        return CeilingFinding("PCIe", "PCIe ceiling not measured (no NVML or CUDA copy)", None)
    ceiling_mb_s = e.pcie_ceiling_gb_s * 1e3
    if _known(e.pcie_mb_s):
        moved, source = e.pcie_mb_s, ""
    else:  # NVML had no counters: the payload itself is what crossed the link at least
        moved, source = e.plateau_gib_s * (1 << 30) / 1e6, " (payload; NVML gave no RX/TX)"
    share = moved / ceiling_mb_s
    return CeilingFinding("PCIe", f"PCIe {share:.0%} of {e.pcie_ceiling_gb_s:.0f} GB/s{source}", share >= PCIE_SHARE)


def cpu_check(e: Evidence) -> CeilingFinding:
    parts, binds = [], False
    if _known(e.engine_cpu_pct) and e.cpus_allowed:
        share = e.engine_cpu_pct / (100.0 * e.cpus_allowed)
        cpus = f"{e.cpus_allowed} CPU" + ("s" if e.cpus_allowed != 1 else "")
        parts.append(f"CPU {share:.0%} of {cpus}")
        binds = share >= CPU_SHARE
    else:
        parts.append("engine CPU not measured")
    if _known(e.busiest_thread_pct) and e.busiest_thread_pct >= THREAD_PCT:
        parts.append(f"one thread at {e.busiest_thread_pct:.0f}%")
        binds = True
    if _known(e.system_busy_pct) and e.system_busy_pct >= SYSTEM_PCT:
        parts.append(f"machine {e.system_busy_pct:.0f}% busy")
        binds = True
    measured = _known(e.engine_cpu_pct) or _known(e.system_busy_pct)
    return CeilingFinding("CPU", ", ".join(parts), binds if measured else None)


def memory_check(e: Evidence) -> CeilingFinding | None:
    if e.page_cache:
        return CeilingFinding("memory copies", "through the page cache", None)
    if e.compat:
        return CeilingFinding("memory copies", "through cuFile's compat bounce buffers", None)
    return None


def own_ceiling_check(e: Evidence) -> CeilingFinding | None:
    """The plateau against what the path moves when storage drops out (measured for a path-overhead verdict)."""
    if _known(e.own_ceiling_gib_s) and e.own_ceiling_gib_s:
        share = e.plateau_gib_s / e.own_ceiling_gib_s
        return CeilingFinding(
            "own ceiling",
            f"{share:.0%} of its own ceiling ({gib(e.own_ceiling_gib_s)} from the page cache, --source cache)",
            share >= OWN_SHARE,
        )
    if e.own_ceiling_note:
        return CeilingFinding("own ceiling", f"own ceiling not measured ({e.own_ceiling_note})", None)
    return None


def little_check(e: Evidence) -> CeilingFinding | None:
    if not _known(e.little_ratio) or not e.concurrency:
        return None
    off = not LITTLE_LOW <= e.little_ratio <= LITTLE_HIGH
    text = f"Little: {e.concurrency} in flight, IOPS x latency {e.little_in_flight:.1f} ({e.little_ratio:.0%})"
    if e.little_ratio < LITTLE_LOW:
        text += ": the rest of the time is spent outside the device (queuing or work in the path)"
    elif e.little_ratio > LITTLE_HIGH:
        text += ": latency counts more than the I/O in flight (queuing before the device)"
    return CeilingFinding("Little", text, off)


def bottleneck(e: Evidence) -> BottleneckFinding:
    """The ceiling that binds ``e``'s plateau, the checks that say so, and advice where xferscope knows it."""
    storage = storage_check(e)
    pcie = pcie_check(e)
    cpu = cpu_check(e)
    memory = memory_check(e)
    little = little_check(e)
    own = own_ceiling_check(e)
    checks = tuple(c for c in (storage, pcie, cpu, memory, own, little) if c is not None)
    above = _known(e.storage_gib_s) and e.storage_gib_s and e.plateau_gib_s > ABOVE_STORAGE * e.storage_gib_s
    if e.page_cache and (above or e.path == "host"):
        kind, detail = "memory copies", "page cache: memory is read, not storage"
    elif pcie is not None and pcie.binds:
        kind, detail = "PCIe", ""
    elif cpu.binds:
        kind, detail = "CPU", _cpu_detail(e)
    elif storage.binds or (e.path == "host" and not e.page_cache):
        kind, detail = "storage", ""
    elif e.compat and storage.binds is False:
        kind, detail = "memory copies", "cuFile compat bounce buffers"
    elif storage.binds is None:
        kind, detail = "undetermined", "storage ceiling not measured"
    else:
        kind, detail = "path overhead", f"{e.plateau_gib_s / e.storage_gib_s:.0%} of storage" + _own_detail(own)
    return BottleneckFinding(kind, detail, checks, tuple(advice(e, kind, little)))


def _own_detail(own: CeilingFinding | None) -> str:
    if own is None or own.binds is None:
        return ""
    if own.binds:
        return "; at its own ceiling from memory"
    return "; below its own ceiling from memory: a cost per request, not a rate"


#: which CPU binds (``_cpu_binds``)
ONE_THREAD, ITS_CPUS, BUSY_MACHINE = "one thread", "its CPUs", "busy machine"


def _cpu_binds(e: Evidence) -> str:
    """ONE_THREAD (a thread at its core's limit), ITS_CPUS (the CPUs it may use, full) or BUSY_MACHINE."""
    if _known(e.busiest_thread_pct) and e.busiest_thread_pct >= THREAD_PCT:
        return ONE_THREAD
    if _known(e.engine_cpu_pct) and e.cpus_allowed and e.engine_cpu_pct >= CPU_SHARE * 100 * e.cpus_allowed:
        return ITS_CPUS
    return BUSY_MACHINE


def _cpu_detail(e: Evidence) -> str:
    binds = _cpu_binds(e)
    if binds == ONE_THREAD:
        return "one thread at 100%" if e.busiest_thread_pct >= 99.5 else f"one thread at {e.busiest_thread_pct:.0f}%"
    return "its CPUs are full" if binds == ITS_CPUS else "the machine is busy"


def advice(e: Evidence, kind: str, little: CeilingFinding | None = None) -> list[str]:
    """What to try next, where xferscope knows it."""
    out: list[str] = []
    if e.unsaturated:
        options = " and ".join(
            o for axis, o in (("workers", "--max-workers"), ("iodepth", "--max-qd")) if axis in e.unsaturated
        )
        out.append(f"still gaining at {e.limit}: the plateau may lie beyond; raise {options}")
    if kind == "CPU":
        binds = _cpu_binds(e)
        if binds == ONE_THREAD:
            out.append(
                "one thread saturates a core: spread it over more workers"
                + (", or keep more in flight per thread (--max-qd)" if e.path in ("host", "cufile-batch") else "")
            )
        elif binds == BUSY_MACHINE:
            out.append("other processes keep the CPUs busy: measure again on a quiet machine")
        else:
            out.append("the CPUs it may use are full: allow more (--cpus), or a path that copies less")
    if kind == "PCIe":
        out.append("the link is full: spread the work over GPUs on other links (--gpu 0,1)")
    if e.page_cache:
        out.append(
            "reads come through the page cache: use a file larger than memory, or a path that reads "
            "with O_DIRECT" + (" (cuFile's compat batch path does not)" if e.path == "cufile-batch" else "")
        )
    if e.compat:
        split = split_advice(e)
        if split:
            out.append(split)
        if kind in ("memory copies", "path overhead"):
            out.append("cuFile runs in compat mode: with nvidia-fs loaded (GDS) reads skip the bounce buffers")
    if little is not None and little.binds:
        out.append("IOPS x latency does not match the concurrency: look for queuing outside the device")
    return out


def split_advice(e: Evidence) -> str | None:
    """Whether the path would gain from splitting its requests (``--split``): the one rule of
    ``engines.split``, which the other outputs that give advice use too."""

    return rule(e.path, e.block_size, e.split, "compat" if e.compat else None)


def verdict_line(e: Evidence, found: BottleneckFinding) -> str:
    """One line per block size, e.g. ``1M: bounce-async plateau 2.90 GiB/s at 4 workers = 97% of storage
    (host 3.00 GiB/s); PCIe 6% of 55 GB/s; CPU 18% of 16 CPUs → storage-bound``."""
    checks = [c.text for c in found.checks if c.ceiling not in ("storage", "Little")]
    storage = next(c for c in found.checks if c.ceiling == "storage")
    head = f"{format_size(e.block_size)}: {e.path} plateau {gib(e.plateau_gib_s)} at {e.knee}"
    joiner = " = " if storage.binds is not None else " " if e.path == "host" else "; "
    return f"{head}{joiner}{storage.text}" + "".join(f"; {c}" for c in checks) + f" → {found.word}"
