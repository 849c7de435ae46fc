"""GPU telemetry through NVML (``pynvml``), and the measured host<->GPU copy ceiling.

``GpuMeter(gpus).read()`` gives, per GPU: utilisation, memory used, PCIe RX and
TX throughput, SM clock and the PCIe link (current and maximum generation and
width), plus ``link_ceiling_h2d_gb_s``/``link_ceiling_d2h_gb_s`` once measured.
NVML's PCIe counters take about 20 ms each to read, so a background thread
keeps the latest reading and ``read()`` returns it at once: the sampler is
never held up. Without a GPU or NVML the meter reads ``[]`` and says why in
``reason``; nothing fails.

``measure_link_ceiling(index)`` times pinned host->device and device->host
copies of 256 MiB (the practical PCIe limit, as p2pBandwidthLatencyTest shows
it), once per boot: the figures are kept in this process and in a small file
under the XDG cache directory, keyed by the boot id and the GPU's UUID.
"""
from __future__ import annotations

import contextlib
import json
import os
import statistics
import threading
import time
from typing import Any

from xferscope.errors import NotWritten
from xferscope.safe_write import write_output

CEILING_BYTES = 256 << 20
CEILING_REPS = 5
_session_ceilings: dict[str, dict[str, float]] = {}
_ceiling_lock = threading.Lock()


# ------------------------------------------------------------------ NVML

def _nvml():
    """pynvml, initialised (the caller shuts it down); raises when there is no NVML or GPU."""
    from xferscope.gpus import NO_GPU_ENV, hidden_gpus

    if hidden_gpus():
        raise RuntimeError(f"hidden by {NO_GPU_ENV}")
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


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


def _sysfs_pci(bus_id: str) -> str:
    """NVML's "00000000:18:00.0" as sysfs writes it: "0000:18:00.0"."""
    return bus_id.lower()[-12:]


def _read_sysfs(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def pci_locality(bus_id: str) -> dict[str, Any]:
    """Where a PCI device sits, from sysfs: ``numa_node`` (-1: the kernel does not know) and
    ``local_cpus`` (the kernel's cpulist text), each only when sysfs has it."""
    sysfs = f"/sys/bus/pci/devices/{_sysfs_pci(bus_id)}"
    out: dict[str, Any] = {}
    node = _read_sysfs(f"{sysfs}/numa_node")
    if node is not None and node.lstrip("-").isdigit():
        out["numa_node"] = int(node)
    cpus = _read_sysfs(f"{sysfs}/local_cpulist")
    if cpus:
        out["local_cpus"] = cpus
    return out


def _static(nv, handle, index: int) -> dict[str, Any]:
    """What does not change during a run: name, UUID, bus, link maxima, memory size, NUMA node."""
    d: dict[str, Any] = {"index": index, "name": _text(_try(nv.nvmlDeviceGetName, handle) or "GPU")}
    uuid = _try(nv.nvmlDeviceGetUUID, handle)
    if uuid:
        d["uuid"] = _text(uuid)
    pci = _try(nv.nvmlDeviceGetPciInfo, handle)
    if pci is not None:
        d["pci_bus_id"] = _text(pci.busId)
        d.update(pci_locality(d["pci_bus_id"]))
    for key, fn in (("link_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
                    ("link_width_max", "nvmlDeviceGetMaxPcieLinkWidth")):
        value = _try(getattr(nv, fn), handle)
        if value is not None:
            d[key] = int(value)
    mem = _try(nv.nvmlDeviceGetMemoryInfo, handle)
    if mem is not None:
        d["mem_total_mib"] = mem.total / (1 << 20)
    return d


def _dynamic(nv, handle) -> dict[str, Any]:
    """One reading of what moves: utilisation, memory used, PCIe traffic, SM clock, current link."""
    d: dict[str, Any] = {}
    util = _try(nv.nvmlDeviceGetUtilizationRates, handle)
    if util is not None:
        d["util_pct"] = float(util.gpu)
    mem = _try(nv.nvmlDeviceGetMemoryInfo, handle)
    if mem is not None:
        d["mem_used_mib"] = mem.used / (1 << 20)
        d["mem_total_mib"] = mem.total / (1 << 20)
    for key, counter in (("pcie_rx_mb_s", "NVML_PCIE_UTIL_RX_BYTES"), ("pcie_tx_mb_s", "NVML_PCIE_UTIL_TX_BYTES")):
        kib_s = _try(nv.nvmlDeviceGetPcieThroughput, handle, getattr(nv, counter))
        if kib_s is not None:
            d[key] = kib_s * 1024 / 1e6  # NVML counts KiB/s over a 20 ms window
    clock = _try(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM)
    if clock is not None:
        d["sm_clock_mhz"] = float(clock)
    for key, fn in (("link_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
                    ("link_width", "nvmlDeviceGetCurrPcieLinkWidth")):
        value = _try(getattr(nv, fn), handle)
        if value is not None:
            d[key] = int(value)
    return d


def gpu_inventory() -> list[dict[str, Any]]:
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
            for moving in ("util_pct", "pcie_rx_mb_s", "pcie_tx_mb_s", "sm_clock_mhz"):
                d.pop(moving, None)
            ceiling = cached_link_ceiling(i)
            if ceiling:
                d.update(ceiling)
            out.append(d)
        return out
    except Exception:
        return []
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def inventory_and_reason() -> tuple[list[dict[str, Any]], str | None]:
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

    def __init__(self, gpus: list[int], period: float = 0.1, measure_ceilings: bool = True):
        self.gpus = list(gpus)
        self.period = period
        self.reason: str | None = None
        self._nv = None
        self._handles: list[tuple[int, Any, dict[str, Any]]] = []
        self._latest: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
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
            ceiling = measure_link_ceiling(g) if measure_ceilings else cached_link_ceiling(g)
            if ceiling:
                static.update(ceiling)
        self._poll()
        self._thread = threading.Thread(target=self._loop, name="xferscope-gpu-meter", daemon=True)
        self._thread.start()

    @property
    def available(self) -> bool:
        return self.reason is None

    def _poll(self) -> None:
        readings = []
        for _, handle, static in self._handles:
            d = dict(static)
            d.update(_dynamic(self._nv, handle))
            readings.append(d)
        with self._lock:
            self._latest = readings

    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                self._poll()
            except Exception:
                pass
            self._stop.wait(max(0.0, self.period - (time.monotonic() - t0)))

    def read(self) -> list[dict[str, Any]]:
        """The latest reading of each GPU (a list of dicts); [] without a GPU."""
        with self._lock:
            return [dict(d) for d in self._latest]

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._nv is not None:
            with contextlib.suppress(Exception):
                self._nv.nvmlShutdown()
            self._nv = None


def run_means(readings: list[list[dict[str, Any]]] | tuple) -> dict[int, dict[str, float]]:
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


# ------------------------------------------------------------------ link ceiling

def _boot_id() -> str:
    return _read_sysfs("/proc/sys/kernel/random/boot_id") or "unknown-boot"


def cache_file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "xferscope", "link-ceiling.json")


def _gpu_key(index: int) -> str:
    try:
        nv = _nvml()
    except Exception:
        return f"index-{index}"
    try:
        return _text(nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(index)))
    except Exception:
        return f"index-{index}"
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def _load_file() -> dict[str, dict[str, float]]:
    try:
        with open(cache_file()) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("boot_id") != _boot_id():
        return {}
    gpus = data.get("gpus")
    return gpus if isinstance(gpus, dict) else {}


def _save_file(key: str, value: dict[str, float]) -> None:
    path = cache_file()
    with contextlib.suppress(OSError, NotWritten):  # a cache: measured again next time when it cannot be kept
        os.makedirs(os.path.dirname(path), exist_ok=True)
        gpus = _load_file()
        gpus[key] = value
        write_output(path, json.dumps({"boot_id": _boot_id(), "gpus": gpus}))


def cached_link_ceiling(index: int) -> dict[str, float] | None:
    """The measured ceiling of GPU ``index`` if this boot has one (no measuring)."""
    key = _gpu_key(index)
    with _ceiling_lock:
        if key in _session_ceilings:
            return dict(_session_ceilings[key])
        value = _load_file().get(key)
        if isinstance(value, dict) and "link_ceiling_h2d_gb_s" in value:
            _session_ceilings[key] = value
            return dict(value)
    return None


def measure_link_ceiling(index: int) -> dict[str, float] | None:
    """Pinned H2D and D2H copy bandwidth of GPU ``index`` in GB/s (10^9 B/s), measured once per boot.

    Returns ``{"link_ceiling_h2d_gb_s": .., "link_ceiling_d2h_gb_s": ..}``, or None where
    there is no GPU or CUDA (nothing fails).
    """
    cached = cached_link_ceiling(index)
    if cached:
        return cached
    try:
        value = _measure(index)
    except Exception:
        return None
    key = _gpu_key(index)
    with _ceiling_lock:
        _session_ceilings[key] = value
    _save_file(key, value)
    return dict(value)


def _measure(index: int, size: int = CEILING_BYTES, reps: int = CEILING_REPS) -> dict[str, float]:
    from xferscope.engines import gpu_setup

    if gpu_setup.unavailable_reason():
        raise RuntimeError(gpu_setup.unavailable_reason())
    cu = gpu_setup.driver()
    check = gpu_setup.check
    with gpu_setup.GpuResources() as res:
        dev = res.device_memory(index, size)
        host = res.pinned_memory(index, size)
        stream = res.stream(index)
        start, stop = res.event(index, timing=True), res.event(index, timing=True)

        def timed(copy) -> float:
            check(cu.cuEventRecord(start, stream), "cuEventRecord")
            check(copy(), "copy")
            check(cu.cuEventRecord(stop, stream), "cuEventRecord")
            check(cu.cuEventSynchronize(stop), "cuEventSynchronize")
            ms = check(cu.cuEventElapsedTime(start, stop), "cuEventElapsedTime")
            return size / 1e9 / (ms / 1e3)

        def h2d():
            return cu.cuMemcpyHtoDAsync(dev, host, size, stream)

        def d2h():
            return cu.cuMemcpyDtoHAsync(host, dev, size, stream)

        timed(h2d), timed(d2h)  # warm-up
        return {"link_ceiling_h2d_gb_s": statistics.median(timed(h2d) for _ in range(reps)),
                "link_ceiling_d2h_gb_s": statistics.median(timed(d2h) for _ in range(reps))}
