"""The practical host<->GPU copy limit: pinned host->device and device->host copies of 256 MiB (as
p2pBandwidthLatencyTest measures it), timed once per boot and kept in ``xferscope.gpus``."""

from __future__ import annotations

import statistics

from xferscope.engines import gpu_setup
from xferscope.gpus import cached_link_ceiling, keep_link_ceiling

CEILING_BYTES = 256 << 20
CEILING_REPS = 5


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
    keep_link_ceiling(index, value)
    return dict(value)


def _measure(index: int, size: int = CEILING_BYTES, reps: int = CEILING_REPS) -> dict[str, float]:
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
        return {
            "link_ceiling_h2d_gb_s": statistics.median(timed(h2d) for _ in range(reps)),
            "link_ceiling_d2h_gb_s": statistics.median(timed(d2h) for _ in range(reps)),
        }
