"""Which GPUs this machine has, through NVML, without failing where there are none."""
from __future__ import annotations

import os

from xferscope.errors import SpecError

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
        raise SpecError("gpu", f"GPU {bad[0]} does not exist; this machine has {n} "
                               f"(indices 0..{n - 1})")
