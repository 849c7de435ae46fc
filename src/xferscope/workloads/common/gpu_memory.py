"""GPU memory for a workload's buffers: each GPU's free memory, measured in a process of its own (CUDA is never
loaded into the command's), the share of it a workload may take, and the pinned host memory its I/O goes through."""

from __future__ import annotations

from typing import Any

from xferscope.errors import SpecError

#: the share of free memory (a GPU's, or the host's available) a workload's buffers may take
MEMORY_SHARE = 0.9


def free_gpu_memory(gpus: list[int]) -> dict[int, int]:
    """Free bytes of each GPU, read here (the child's side of ``measured_free``). Raises SpecError without a GPU."""
    from xferscope.engines import gpu_setup

    reason = gpu_setup.unavailable_reason()
    if reason:
        raise SpecError("gpu", f"no GPU to land the batches in: {reason}")
    with gpu_setup.GpuResources() as res:
        out = {}
        for g in gpus:
            res.context(g)
            out[g] = gpu_setup.memory_info(g)[0]
        return out


def measured_free(gpus: list[int], what: str = "the GPUs' free memory") -> dict[int, int]:
    """Free bytes of each GPU in ``gpus``, measured in a short-lived process of its own."""
    from xferscope.isolation import call

    return call(free_gpu_memory, gpus, what=what)


def pinned(resources: Any, gpu: int, size: int) -> tuple[int, str]:
    """``size`` bytes of pinned host memory to read into or write from with O_DIRECT, as ``run``'s bounce paths pin
    theirs by default (``gpu_native.pin_host_memory``): on 2 MiB huge pages where the kernel offers them (a 16 MiB
    request into 4 KiB pages is split into many on disks that take few segments a request: doctor's buffer
    check), else, or where pinning those is refused, CUDA's own; the address, and which memory it is."""
    from xferscope.engines import host
    from xferscope.engines.gpu_native import pin_host_memory

    base, kind, _ = pin_host_memory(resources, gpu, size, huge=host.huge_pages_offered())
    return base, kind
