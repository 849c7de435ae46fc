"""GPU memory for a workload's buffers: each GPU's free memory, measured in a process of its own (CUDA is never
loaded into the command's), and the share of it a workload may take."""

from __future__ import annotations

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
