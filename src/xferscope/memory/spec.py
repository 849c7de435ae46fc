"""What a memory sweep measures: ``MemSpec``, validated once, with errors naming the field and the fix."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from xferscope.errors import SpecError
from xferscope.memory.machine import BASE_PAGE, SYSFS, allowed_cpus, format_cpu_list
from xferscope.units import format_size, parse_size

MODES = ("idle", "loaded", "peak", "curve", "matrix")
BACKENDS = ("builtin", "mlc")
BUILTIN_TRAFFIC = ("R", "W2", "W3", "W5", "W6", "W7", "W8", "W9", "W10")
NT_TRAFFIC = ("W6", "W7", "W8", "W9", "W10")
# MLC's default injection delays for --loaded_latency.
DEFAULT_DELAYS = (0, 2, 8, 15, 50, 100, 200, 300, 400, 500, 700, 1000, 1300, 1700, 2500, 3500, 5000, 9000, 20000)
# The rows of `mlc --max_bandwidth`: all reads, 3:1, 2:1, 1:1 reads:writes, stream-triad-like.
PEAK_TRAFFIC = ("R", "W3", "W2", "W5", "W10")
# Measured seconds per point when none are given.
DEFAULT_POINT_SECONDS = {"idle": 2.0, "loaded": 2.0, "peak": 2.0, "curve": 0.25, "matrix": 1.0}
# Page sizes a buffer may ask for: 4 KiB (THP refused), transparent huge pages, hugetlbfs 2 MiB or 1 GiB.
PAGE_SIZES = ("4k", "thp", "2m", "1g")
PAGE_SIZE_TEXT = {
    "4k": "4 KiB pages",
    "thp": "transparent huge pages (2 MiB)",
    "2m": "hugetlbfs 2 MiB pages",
    "1g": "hugetlbfs 1 GiB pages",
}
# multichase's default -T: 64 pages of the base page size.
DEFAULT_LOCALITY_PAGES = 64
WHOLE = "whole"
DEFAULT = "default"

MIB = 1 << 20
GIB = 1 << 30
HUGE_PAGE = 2 * MIB
MIN_BUFFER = MIB
MAX_DELAY = 10_000_000


@dataclass(frozen=True)
class MemSpec:
    """What to measure. ``validated()`` returns a normalised copy or raises SpecError."""

    mode: str = "loaded"
    traffic: tuple[str, ...] | None = None  # default: R, or MLC's five peak rows in peak mode
    strides: tuple[int, ...] = (64,)
    delays: tuple[int, ...] = DEFAULT_DELAYS
    point_seconds: float | None = None  # default per mode (DEFAULT_POINT_SECONDS)
    threads: int | None = None  # load threads; default: every CPU but the latency thread's
    cpus: tuple[int, ...] | None = None  # load-thread CPUs (MLC's -k)
    latency_cpu: int | None = None  # default: the first allowed CPU not in ``cpus``
    buffer_bytes: int | None = None  # per thread (MLC's -b); default from the last-level cache size
    backend: str = "builtin"
    mlc_path: str | None = None
    seed: int = 0x5EED
    # multichase's -T: "default" (64 base pages), "whole" (one random cycle over the whole buffer), or a
    # window in bytes (as text: "262144"); "page" and sizes like 256K are accepted and normalised
    locality: str = DEFAULT
    whole_idle: bool = True  # the idle point also measures the whole-buffer chase (the page-walk cost)
    pages: str = "thp"
    max_size: int | None = None  # curve: the largest working set (default: 8x the last-level cache)
    per_octave: int = 4  # curve: working-set sizes per doubling
    sysfs: str = SYSFS  # where CPU, cache, NUMA and huge-page facts are read

    @property
    def traffic_types(self) -> tuple[str, ...]:
        """The traffic types of a validated spec (``validated()`` fills in the default)."""
        if self.traffic is None:
            raise ValueError("MemSpec.traffic is not set: measure a validated() spec")
        return self.traffic

    @property
    def seconds_per_point(self) -> float:
        """The measured seconds per point of a validated spec (``validated()`` fills in the default)."""
        if self.point_seconds is None:
            raise ValueError("MemSpec.point_seconds is not set: measure a validated() spec")
        return self.point_seconds

    def _checked_cpus(self, mode: str) -> tuple[int, ...] | None:
        """The load CPUs (None: not given) and the latency CPU: each one this process may use, none twice, and
        (loaded) the latency thread on a CPU of its own."""
        cpus = None if self.cpus is None else tuple(self.cpus)
        if cpus is not None:
            if not cpus:
                raise SpecError("cpus", "the CPU list is empty; name CPUs like 1-15 or 2,4,6")
            if len(set(cpus)) != len(cpus):
                raise SpecError("cpus", "a CPU is named twice; name each load CPU once")
            allowed = allowed_cpus()
            for c in cpus:
                if c not in allowed:
                    raise SpecError(
                        "cpus", f"CPU {c} is not available to this process; pick from {format_cpu_list(allowed)}"
                    )
        if self.latency_cpu is not None and self.latency_cpu not in allowed_cpus():
            raise SpecError(
                "latency_cpu", f"CPU {self.latency_cpu} is not available; pick from {format_cpu_list(allowed_cpus())}"
            )
        if cpus is not None and self.latency_cpu is not None and self.latency_cpu in cpus and mode == "loaded":
            raise SpecError("latency_cpu", f"CPU {self.latency_cpu} also runs a load thread; pick a CPU not in --cpus")
        return cpus

    def validated(self) -> MemSpec:
        mode = str(self.mode).lower()
        if mode not in MODES:
            raise SpecError("mode", f"{self.mode!r} is not a mode; use idle, loaded or peak")
        backend = str(self.backend).lower()
        if backend not in BACKENDS:
            raise SpecError("backend", f"{self.backend!r} is not a backend; use builtin or mlc")
        traffic: tuple[str, ...]
        if self.traffic is None:
            traffic = PEAK_TRAFFIC if mode == "peak" else ("R",)
        else:
            traffic = tuple(_traffic_name(t, backend) for t in self.traffic)
        if not traffic:
            raise SpecError("traffic", "name at least one traffic type, e.g. R or W6")
        strides = tuple(self.strides)
        if not strides:
            raise SpecError("stride", "name at least one stride in bytes, e.g. 64")
        for s in strides:
            if not isinstance(s, int) or s < 64 or s > 4096 or s % 64:
                raise SpecError("stride", f"{s!r} is not a stride we measure; use a multiple of 64 from 64 to 4096")
        delays = tuple(self.delays)
        if not delays:
            raise SpecError("delays", "name at least one injection delay, e.g. 0,100,1000")
        for d in delays:
            if not isinstance(d, int) or d < 0 or d > MAX_DELAY:
                raise SpecError("delays", f"{d!r} is not a delay; use whole numbers from 0 to {MAX_DELAY}")
        seconds = float(DEFAULT_POINT_SECONDS[mode] if self.point_seconds is None else self.point_seconds)
        if not (0.05 <= seconds <= 600) or math.isnan(seconds):
            raise SpecError("point_seconds", f"{self.point_seconds!r} is out of range; use 0.05 to 600 seconds")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise SpecError("threads", f"{self.threads!r} is not a thread count; use 1 or more")
        cpus = self._checked_cpus(mode)
        if self.buffer_bytes is not None:
            if not isinstance(self.buffer_bytes, int) or self.buffer_bytes < MIN_BUFFER:
                raise SpecError(
                    "buffer", f"{self.buffer_bytes!r} is too small; use at least 1M (default: 4x the last-level cache)"
                )
            if self.buffer_bytes // min(strides) >= 2**32:
                raise SpecError(
                    "buffer", "the buffer holds more than 2^32 chase elements; use a smaller buffer or a larger stride"
                )
        locality = normalise_locality(self.locality, strides, backend)
        pages = str(self.pages).lower()
        if pages not in PAGE_SIZES:
            raise SpecError("pages", f"{self.pages!r} is not a page size; use 4k, thp, 2m or 1g")
        if self.max_size is not None and (not isinstance(self.max_size, int) or self.max_size < 64 * 1024):
            raise SpecError("max_size", f"{self.max_size!r} is too small for a curve; use at least 64K")
        if not isinstance(self.per_octave, int) or not 1 <= self.per_octave <= 16:
            raise SpecError("per_octave", f"{self.per_octave!r} sizes per octave; use 1 to 16")
        if backend == "mlc" and pages == "4k":
            raise SpecError(
                "pages", "mlc has no option for 4 KiB pages; use thp (mlc's own allocation), 2m (mlc -L) or 1g (mlc -h)"
            )
        return replace(
            self,
            mode=mode,
            backend=backend,
            traffic=traffic,
            strides=strides,
            delays=delays,
            point_seconds=seconds,
            cpus=cpus,
            locality=locality,
            pages=pages,
        )


def normalise_locality(value: Any, strides: tuple[int, ...], backend: str = "builtin") -> str:
    """'default', 'whole', or a window in bytes as text; SpecError naming the fix otherwise."""
    text = str(value).strip().lower().replace(" ", "")
    if text in ("", DEFAULT):
        return DEFAULT
    if text in (WHOLE, "whole-buffer", "all"):
        return WHOLE
    if backend == "mlc":
        raise SpecError(
            "locality",
            f"mlc has no locality window ({value!r}); use default (mlc's own chase) or "
            "whole (mlc -r, random access over the buffer)",
        )
    pages = re.fullmatch(r"(\d*)-?pages?", text)
    try:
        window = (int(pages.group(1) or 1) * BASE_PAGE) if pages else parse_size(text)
    except ValueError:
        raise SpecError(
            "locality",
            f"{value!r} is not a locality; use a size like 256K, page, whole or default (64 pages, multichase's -T)",
        ) from None
    if window % 64 or window < max(strides):
        raise SpecError(
            "locality", f"{value!r} must be a multiple of 64 bytes and at least the stride ({max(strides)} B)"
        )
    return str(window)


def locality_bytes(locality: str) -> int | None:
    """The chase window of a normalised locality, in bytes; None for the whole buffer."""
    if locality == WHOLE:
        return None
    if locality == DEFAULT:
        return DEFAULT_LOCALITY_PAGES * BASE_PAGE
    return int(locality)


def locality_label(window: int | None, buffer: int | None = None) -> str:
    """How a chase's locality is named everywhere: '64-page', 'whole-buffer', '96K'."""
    if window is None or (buffer is not None and window >= buffer):
        return "whole-buffer"
    if window % BASE_PAGE == 0:
        return f"{window // BASE_PAGE}-page"
    return format_size(window)


def locality_text(label: str | None) -> str:
    """'64-page' -> '64-page locality'; 'whole-buffer' stays; None -> ''."""
    if not label:
        return ""
    return label if label == "whole-buffer" or label.startswith("mlc") else f"{label} locality"


def _traffic_name(name: Any, backend: str) -> str:
    text = str(name).strip().upper()
    if text in BUILTIN_TRAFFIC:
        return text
    if backend == "mlc" and re.fullmatch(r"W\d{1,2}", text):
        return text
    hint = ", ".join(BUILTIN_TRAFFIC)
    raise SpecError("traffic", f"{name!r} is not a traffic type we generate; use one of {hint}")


def parse_int_list(text: str, field_name: str) -> tuple[int, ...]:
    """'0,100,1000' -> (0, 100, 1000); one line naming the field when it is not a list of whole numbers."""
    items = [t for t in re.split(r"[,\s]+", str(text).strip()) if t]
    try:
        return tuple(int(t) for t in items)
    except ValueError:
        raise SpecError(field_name, f"{text!r} is not a list of whole numbers; write them like 0,100,1000") from None
