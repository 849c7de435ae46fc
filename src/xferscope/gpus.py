"""The GPUs of this machine: which there are (through NVML, without failing where there are none), where
each sits (its PCI bus, NUMA node and local CPUs, from sysfs), and the host<->GPU copy ceilings measured
on them this boot.

The engines (binding workers near their GPU, the run's environment) and the telemetry (the GPU panel)
both read these facts here; the ceilings are measured by ``xferscope.engines.link_ceiling`` and kept
here, in this process and in a small file under the XDG cache directory keyed by the boot id and the
GPU's UUID.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading

from xferscope.errors import NotWritten, SpecError
from xferscope.records import GpuReading
from xferscope.safe_write import write_output

#: set (to anything but "" or "0"): xferscope acts as on a machine without any GPU, in every process it
#: starts (NVML, CUDA and cuFile see none): for runs of the host path that must not touch a GPU driver
NO_GPU_ENV = "XFERSCOPE_NO_GPU"


def hidden_gpus() -> bool:
    return os.environ.get(NO_GPU_ENV, "") not in ("", "0")


def gpu_count() -> tuple[int, str]:
    """(number of GPUs, reason when 0)."""
    if hidden_gpus():
        return 0, f"hidden by {NO_GPU_ENV}"
    try:
        import pynvml
    except ImportError:
        return 0, "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return 0, f"no NVIDIA driver ({exc})"
    try:
        n = pynvml.nvmlDeviceGetCount()
        return n, "" if n else "NVML sees no GPU"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def check_gpu_indices(gpus: list[int]) -> None:
    """Raise SpecError naming the first GPU index that does not exist here."""
    n, why = gpu_count()
    if n == 0:
        raise SpecError("gpu", f"no GPU on this machine ({why})")
    bad = [g for g in gpus if g >= n]
    if bad:
        raise SpecError("gpu", f"GPU {bad[0]} does not exist; this machine has {n} (indices 0..{n - 1})")


def gpu_text(gpus: list[int]) -> str:
    """A GPU set as people write it: [0, 1, 2, 3] -> '0-3'; [0, 1, 6, 7] -> '0,1,6,7'."""
    if len(gpus) > 2 and gpus == list(range(gpus[0], gpus[0] + len(gpus))):
        return f"{gpus[0]}-{gpus[-1]}"
    return ",".join(map(str, gpus))


# ------------------------------------------------------------------ NVML


def nvml():
    """pynvml, initialised (the caller shuts it down); raises when there is no NVML or GPU."""
    if hidden_gpus():
        raise RuntimeError(f"hidden by {NO_GPU_ENV}")
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def nvml_text(value) -> str:
    """NVML's strings (bytes in older bindings) as text."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


# ------------------------------------------------------------------ where a GPU sits


def _sysfs_pci(bus_id: str) -> str:
    """NVML's "00000000:18:00.0" as sysfs writes it: "0000:18:00.0"."""
    return bus_id.lower()[-12:]


def read_sysfs(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def pci_locality(bus_id: str) -> GpuReading:
    """Where a PCI device sits, from sysfs: ``numa_node`` (-1: the kernel does not know) and
    ``local_cpus`` (the kernel's cpulist text), each only when sysfs has it."""
    sysfs = f"/sys/bus/pci/devices/{_sysfs_pci(bus_id)}"
    out: GpuReading = {}
    node = read_sysfs(f"{sysfs}/numa_node")
    if node is not None and node.lstrip("-").isdigit():
        out["numa_node"] = int(node)
    cpus = read_sysfs(f"{sysfs}/local_cpulist")
    if cpus:
        out["local_cpus"] = cpus
    return out


# ------------------------------------------------------------------ copy ceilings measured this boot

_session_ceilings: dict[str, dict[str, float]] = {}
_ceiling_lock = threading.Lock()


def _boot_id() -> str:
    return read_sysfs("/proc/sys/kernel/random/boot_id") or "unknown-boot"


def cache_file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "xferscope", "link-ceiling.json")


def _gpu_key(index: int) -> str:
    try:
        nv = nvml()
    except Exception:
        return f"index-{index}"
    try:
        return nvml_text(nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(index)))
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


def keep_link_ceiling(index: int, value: dict[str, float]) -> None:
    """Keep a measured ceiling of GPU ``index`` for this process and for the rest of this boot."""
    key = _gpu_key(index)
    with _ceiling_lock:
        _session_ceilings[key] = value
    _save_file(key, value)
