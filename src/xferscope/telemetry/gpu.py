"""GPU telemetry through NVML (``pynvml``).

``GpuMeter(gpus).read()`` gives, per GPU: utilisation, memory used, PCIe RX and
TX throughput, SM clock and the PCIe link (current and maximum generation and
width), plus ``link_ceiling_h2d_gb_s``/``link_ceiling_d2h_gb_s`` once measured.
NVML's PCIe counters take about 20 ms each to read, so a background thread
keeps the latest reading and ``read()`` returns it at once: the sampler is
never held up. Without a GPU or NVML the meter reads ``[]`` and says why in
``reason``; nothing fails.

A meter shows the copy ceiling kept in ``xferscope.gpus`` for this boot, or
the one its ``ceiling_of`` gives (the engine's process passes the function of
``xferscope.engines.link_ceiling`` that measures it when this boot has none).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from xferscope.gpus import cached_link_ceiling, pci_locality
from xferscope.gpus import nvml as _nvml
from xferscope.gpus import nvml_text as _text
from xferscope.records import GpuReading

# ------------------------------------------------------------------ NVML


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return None


def nvml_failure(exc: Exception) -> str:
    """'no GPU (NVML Shared Library Not Found)', 'no GPU (NVML: Driver Not Loaded)': NVML named once."""
    text = str(exc) or type(exc).__name__
    return f"no GPU ({text})" if "NVML" in text else f"no GPU (NVML: {text})"


def no_gpu_reason() -> str | None:
    """None when NVML sees at least one GPU; else why not (e.g. "no GPU (NVML: Driver Not Loaded)")."""
    try:
        nv = _nvml()
    except ImportError:
        return "no GPU telemetry: nvidia-ml-py is not installed"
    except Exception as exc:
        return nvml_failure(exc)
    try:
        return None if nv.nvmlDeviceGetCount() else "no GPU (NVML sees none)"
    finally:
        nv.nvmlShutdown()


#: the GPU's figures read through NVML calls of one shape: its link's maxima and current state, its PCIe traffic
_MAX_LINK: tuple[tuple[Literal["link_gen_max", "link_width_max"], str], ...] = (
    ("link_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
    ("link_width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
)
_CURRENT_LINK: tuple[tuple[Literal["link_gen", "link_width"], str], ...] = (
    ("link_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
    ("link_width", "nvmlDeviceGetCurrPcieLinkWidth"),
)
_PCIE_TRAFFIC: tuple[tuple[Literal["pcie_rx_mb_s", "pcie_tx_mb_s"], str], ...] = (
    ("pcie_rx_mb_s", "NVML_PCIE_UTIL_RX_BYTES"),
    ("pcie_tx_mb_s", "NVML_PCIE_UTIL_TX_BYTES"),
)
#: what an inventory leaves out: it moves from one reading to the next
_MOVING: tuple[Literal["util_pct", "pcie_rx_mb_s", "pcie_tx_mb_s", "sm_clock_mhz"], ...] = (
    "util_pct",
    "pcie_rx_mb_s",
    "pcie_tx_mb_s",
    "sm_clock_mhz",
)


def _static(nv, handle, index: int) -> GpuReading:
    """What does not change during a run: name, UUID, bus, link maxima, memory size, NUMA node."""
    d: GpuReading = {"index": index, "name": _text(_try(nv.nvmlDeviceGetName, handle) or "GPU")}
    uuid = _try(nv.nvmlDeviceGetUUID, handle)
    if uuid:
        d["uuid"] = _text(uuid)
    pci = _try(nv.nvmlDeviceGetPciInfo, handle)
    if pci is not None:
        d["pci_bus_id"] = _text(pci.busId)
        d.update(pci_locality(d["pci_bus_id"]))
    for key, fn in _MAX_LINK:
        value = _try(getattr(nv, fn), handle)
        if value is not None:
            d[key] = int(value)
    mem = _try(nv.nvmlDeviceGetMemoryInfo, handle)
    if mem is not None:
        d["mem_total_mib"] = mem.total / (1 << 20)
    return d


def _dynamic(nv, handle) -> GpuReading:
    """One reading of what moves: utilisation, memory used, PCIe traffic, SM clock, current link."""
    d: GpuReading = {}
    util = _try(nv.nvmlDeviceGetUtilizationRates, handle)
    if util is not None:
        d["util_pct"] = float(util.gpu)
    mem = _try(nv.nvmlDeviceGetMemoryInfo, handle)
    if mem is not None:
        d["mem_used_mib"] = mem.used / (1 << 20)
        d["mem_total_mib"] = mem.total / (1 << 20)
    for traffic, counter in _PCIE_TRAFFIC:
        kib_s = _try(nv.nvmlDeviceGetPcieThroughput, handle, getattr(nv, counter))
        if kib_s is not None:
            d[traffic] = kib_s * 1024 / 1e6  # NVML counts KiB/s over a 20 ms window
    clock = _try(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM)
    if clock is not None:
        d["sm_clock_mhz"] = float(clock)
    for link, fn in _CURRENT_LINK:
        value = _try(getattr(nv, fn), handle)
        if value is not None:
            d[link] = int(value)
    return d


def _add_ceiling(d: GpuReading, ceiling: dict[str, float] | None) -> None:
    """The copy ceiling measured this boot (``gpus.cached_link_ceiling``), where there is one."""
    if ceiling:
        d["link_ceiling_h2d_gb_s"] = ceiling["link_ceiling_h2d_gb_s"]
        d["link_ceiling_d2h_gb_s"] = ceiling["link_ceiling_d2h_gb_s"]


def gpu_inventory() -> list[GpuReading]:
    """Every GPU with its name, PCIe link (current and max), memory and NUMA node; [] without a GPU."""
    try:
        nv = _nvml()
    except Exception:
        return []
    try:
        out = []
        for i in range(nv.nvmlDeviceGetCount()):
            handle = _try(nv.nvmlDeviceGetHandleByIndex, i)
            if handle is None:
                continue
            d = _static(nv, handle, i)
            d.update(_dynamic(nv, handle))
            for moving in _MOVING:
                d.pop(moving, None)
            ceiling = cached_link_ceiling(i)
            _add_ceiling(d, ceiling)
            out.append(d)
        return out
    except Exception:
        return []
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def inventory_and_reason() -> tuple[list[GpuReading], str | None]:
    """``gpu_inventory()`` and ``no_gpu_reason()`` at once (for one call in a process of its own)."""
    return gpu_inventory(), no_gpu_reason()


def driver_versions() -> dict[str, str]:
    """{"driver": "580.159.04", "cuda": "13.0"} as NVML reports them; {} without a driver."""
    try:
        nv = _nvml()
    except Exception:
        return {}
    try:
        out = {}
        drv = _try(nv.nvmlSystemGetDriverVersion)
        if drv:
            out["driver"] = _text(drv)
        cuda = _try(nv.nvmlSystemGetCudaDriverVersion_v2) or _try(nv.nvmlSystemGetCudaDriverVersion)
        if cuda:
            out["cuda"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        return out
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


class GpuMeter:
    """Latest NVML readings of the GPUs a run uses, refreshed by a background thread."""

    def __init__(
        self, gpus: list[int], period: float = 0.1, ceiling_of: Callable[[int], dict[str, float] | None] | None = None
    ):
        """``ceiling_of(index)``: the copy ceiling of a GPU (default: the one measured this boot, if any)."""
        self.gpus = list(gpus)
        self.period = period
        self.reason: str | None = None
        self._nv = None
        self._handles: list[tuple[int, Any, GpuReading]] = []
        self._latest: list[GpuReading] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._first = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu_seconds = 0.0
        try:
            self._nv = _nvml()
        except ImportError:
            self.reason = "no GPU telemetry: nvidia-ml-py is not installed"
            return
        except Exception as exc:
            self.reason = nvml_failure(exc)
            return
        for g in self.gpus:
            handle = _try(self._nv.nvmlDeviceGetHandleByIndex, g)
            if handle is not None:
                self._handles.append((g, handle, _static(self._nv, handle, g)))
        if not self._handles:
            self.reason = "no GPU (NVML sees none of " + ",".join(map(str, self.gpus)) + ")"
            return
        for g, _, static in self._handles:
            ceiling = (ceiling_of or cached_link_ceiling)(g)
            _add_ceiling(static, ceiling)
        # the first reading too is the thread's: its PCIe counters take 40 ms, and the run's set-up does not wait
        self._thread = threading.Thread(target=self._loop, name="xferscope-gpu-meter", daemon=True)
        self._thread.start()

    @property
    def available(self) -> bool:
        return self.reason is None

    def _poll(self) -> None:
        readings = []
        for _, handle, static in self._handles:
            d = GpuReading(**static)
            d.update(_dynamic(self._nv, handle))
            readings.append(d)
        with self._lock:
            self._latest = readings
        self._first.set()

    def wait_first(self, timeout: float = 2.0) -> bool:
        """Wait for the first reading (``read()`` gives [] before it); False when none came in time."""
        return self._first.wait(timeout) if self._thread is not None else False

    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                self._poll()
            except Exception:
                pass
            self._cpu_seconds = time.thread_time()
            self._stop.wait(max(0.0, self.period - (time.monotonic() - t0)))

    @property
    def cpu_seconds(self) -> float:
        """CPU time this meter's thread has spent so far (NVML's calls): xferscope's own, not the run's."""
        return self._cpu_seconds

    def read(self) -> list[GpuReading]:
        """The latest reading of each GPU; [] without a GPU."""
        with self._lock:
            return [GpuReading(**d) for d in self._latest]

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._nv is not None:
            with contextlib.suppress(Exception):
                self._nv.nvmlShutdown()
            self._nv = None


def run_means(readings: Sequence[Sequence[GpuReading]]) -> dict[int, dict[str, float]]:
    """What a run's GPU readings (one list per sample) add up to, per GPU index: mean PCIe RX and TX
    (MB/s) and utilisation, the most memory used, the number of readings, and RX/TX as a percent of
    the measured copy ceiling where there is one. Evidence for where a run's scaling stops."""
    acc: dict[int, dict[str, list[float]]] = {}
    ceilings: dict[int, dict[str, float]] = {}
    for sample in readings:
        for g in sample:
            index = g.get("index")
            if index is None:
                continue
            seen = acc.setdefault(int(index), {})
            for key in ("pcie_rx_mb_s", "pcie_tx_mb_s", "util_pct", "mem_used_mib"):
                if g.get(key) is not None:
                    seen.setdefault(key, []).append(float(g[key]))
            ceilings[int(index)] = {k: g[k] for k in ("link_ceiling_h2d_gb_s", "link_ceiling_d2h_gb_s") if g.get(k)}
    out: dict[int, dict[str, float]] = {}
    for index, seen in acc.items():
        d: dict[str, float] = {"readings": float(max((len(v) for v in seen.values()), default=0))}
        for key in ("pcie_rx_mb_s", "pcie_tx_mb_s", "util_pct"):
            if seen.get(key):
                d[key] = statistics.fmean(seen[key])
        if seen.get("mem_used_mib"):
            d["mem_used_mib_max"] = max(seen["mem_used_mib"])
        for key, ceiling_key in (("pcie_rx_mb_s", "link_ceiling_h2d_gb_s"), ("pcie_tx_mb_s", "link_ceiling_d2h_gb_s")):
            ceiling = ceilings[index].get(ceiling_key)
            if ceiling:
                d[ceiling_key] = ceiling
            if key in d and ceiling:
                d[key.replace("_mb_s", "_pct_of_link")] = 100 * d[key] / (ceiling * 1e3)
        out[index] = d
    return out


def summed_over_gpus(per_gpu: Any, key: str) -> float | None:
    """A per-GPU figure (``per_gpu``: index -> dict, as results keep it) summed over the GPUs;
    None where no GPU has it (no GPU telemetry was read)."""
    values = [g[key] for g in (per_gpu or {}).values() if isinstance(g, dict) and g.get(key) is not None]
    return sum(values) if values else None
