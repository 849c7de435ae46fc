"""bounce: storage -> pinned host memory -> GPU, the path every GPU program has without GDS.

``bounce`` (gdsio CPU_GPU, ``-x 2``): each worker reads a block into a pinned
buffer (cuMemHostAlloc), copies it to the GPU (cuMemcpyHtoDAsync) and waits
for the copy before the next read. Writes go GPU -> pinned host -> storage.

``bounce-async`` (gdsio CPU_ASYNC_GPU, ``-x 3``): K pinned buffers per worker
(K = --iodepth, at least 2) with an event each. Block n is read into a free
buffer and its copy issued; block n+1 is then read into another free buffer
while block n's copy is in flight, so the copy never sits between two reads.
A buffer is free once its copy has landed (checked without waiting); the one
that landed last is reused first, so two buffers take turns while PCIe is
faster than storage, and the worker waits for a copy only when all K are in
flight (PCIe slower than storage). ``--iodepth`` is that slack, not reads in
flight: each worker has one read in flight, as ``bounce`` and gdsio have.

Both: ``--huge-pages`` puts the pinned buffers on 2 MiB transparent huge pages
(cuMemHostRegister), the same memory ``host --huge-pages`` reads into;
``--split SIZE`` reads each block as parallel sub-requests of SIZE.

``--buffered`` (gdsio CPU_CACHED_GPU, ``-x 4``) reads through the page cache;
the output says so.
"""

from __future__ import annotations

from xferscope.engines.gpu_native import GpuNativeEngine

MAX_PIPELINE = 64  # the native core's limit of buffers per worker


def pipeline_depth(iodepth: int) -> int:
    """Pinned buffers per worker for bounce-async: --iodepth, at least double-buffered."""
    return max(2, min(iodepth, MAX_PIPELINE))


class BounceEngine(GpuNativeEngine):
    name = "bounce"
    xfer_type = "CPU_GPU"
    description = "storage -> pinned host -> GPU, each copy waited for (gdsio CPU_GPU)"
    native_mode = 1  # _iocore.MODE_BOUNCE

    def host_buffers(self) -> int:
        return 1

    def prepare_gpu(self):
        if self.spec.buffered:
            self.labels.append("CPU_CACHED_GPU (gdsio -x 4)")
        self.path_labels()
        return super().prepare_gpu()

    def path_labels(self) -> None:
        if self.spec.iodepth > 1:
            self.labels.append(
                f"psync: queue depth {self.spec.iodepth} not used (one read, then one copy, "
                "per worker; bounce-async pipelines)"
            )

    def environment(self):
        env = super().environment()
        env["pinned_buffers_per_worker"] = self.host_buffers()
        return env


class BounceAsyncEngine(BounceEngine):
    name = "bounce-async"
    xfer_type = "CPU_ASYNC_GPU"
    description = "storage -> pinned host -> GPU, read of block n+1 overlaps the copy of block n (gdsio CPU_ASYNC_GPU)"
    native_mode = 2  # _iocore.MODE_BOUNCE_PIPE

    def host_buffers(self) -> int:
        return pipeline_depth(self.spec.iodepth)

    def path_labels(self) -> None:
        self.labels.append(
            f"pipelined: reads go on while copies land, up to {self.host_buffers()} pinned buffers per worker"
        )
