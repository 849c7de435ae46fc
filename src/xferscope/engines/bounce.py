"""bounce: storage -> pinned host memory -> GPU, the path every GPU program has without GDS.

``bounce`` (gdsio CPU_GPU, ``-x 2``): each worker reads a block into a pinned
buffer, copies it to the GPU (cuMemcpyHtoDAsync) and waits for the copy before
the next read. Writes go GPU -> pinned host -> storage.

``bounce-async`` (gdsio CPU_ASYNC_GPU, ``-x 3``): one read in flight per worker,
as ``bounce`` and gdsio have, and the copies to the GPU land while the next
blocks are read. Reads go into a ring of pinned buffers in turn; the ring's
slots form groups that lie side by side in host and in GPU memory, and a group
goes to the GPU in one copy (cuMemcpyHtoDAsync) once its last block is read:
blocks under 4 MiB in groups of up to 4 MiB (at most 16 blocks), larger ones a
copy each. A copy call costs about as much CPU as a small read, and sits
between two reads once a group rather than once a block. A group's slots are
read into again once its copy has landed (checked without waiting); the worker
waits for a copy only when the reads have come round to a group still in flight
(PCIe slower than storage). The ring holds three groups, or --iodepth buffers
where that is more: ``--iodepth`` is that slack, not reads in flight. Writes go
the other way through K = --iodepth (at least 3) buffers: the data of the next
write is copied from the GPU while this one is written.

Waiting for a copy (``bounce`` always, ``bounce-async`` when every buffer is
in flight) sleeps until just before the copy is predicted to land, then asks:
no spinning through it (the native core's ``wait_copy``).

Both: the pinned buffers are on 2 MiB transparent huge pages, pinned with
cuMemHostRegister, the same memory the host path reads into, where the kernel
offers them; ``--4k-pages`` (or a kernel without them) takes CUDA's pinned
allocation (cuMemHostAlloc). ``--split SIZE`` reads each block as parallel
sub-requests of SIZE.

``--buffered`` (gdsio CPU_CACHED_GPU, ``-x 4``) reads through the page cache;
the output says so.
"""

from __future__ import annotations

from xferscope.engines.gpu_native import PINNED_ALIGN, GpuNativeEngine
from xferscope.units import format_size

MAX_PIPELINE = 64  # the native core's limit of buffers per worker
#: one being read into, one whose copy is in flight, one spare for a copy that lands later than the next read ends
MIN_PIPELINE = 3


#: the read ring: blocks smaller than this go to the GPU in groups of up to this many bytes, one copy a group
COPY_GROUP_BYTES = 4 << 20
MAX_COPY_GROUP = 16


def pipeline_depth(iodepth: int) -> int:
    """Pinned buffers per worker for bounce-async: --iodepth, at least triple-buffered."""
    return max(MIN_PIPELINE, min(iodepth, MAX_PIPELINE))


def copy_group(block_size: int) -> int:
    """Blocks per copy to the GPU in the read ring: small blocks in groups of up to 4 MiB and 16 blocks (a copy
    call costs about as much CPU as a small read), blocks of 4 MiB and more a copy each. Buffers that do not lie
    side by side (blocks not a multiple of 4 KiB) go one a copy."""
    if block_size % PINNED_ALIGN:
        return 1
    return max(1, min(MAX_COPY_GROUP, COPY_GROUP_BYTES // block_size))


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
    description = "storage -> pinned host -> GPU, reads go on while copies land (gdsio CPU_ASYNC_GPU)"
    native_mode = 2  # _iocore.MODE_BOUNCE_PIPE
    #: reads through the ring of grouped copies (False: each block's copy issued after its read, buffers reused
    #: most recently landed first, as writes go; bench/bounce_timeline.py sets it to compare the two)
    read_ring = True
    #: blocks per copy in the ring (None: copy_group's choice; bench/bounce_timeline.py sets 1 to compare)
    blocks_per_copy: int | None = None

    def copy_batch(self) -> int:
        """Blocks per copy of the read ring; 0 where there is no ring (writes)."""
        if self.spec.writes or not self.read_ring:
            return 0
        return self.blocks_per_copy or copy_group(self.spec.block_size)

    def host_buffers(self) -> int:
        group = self.copy_batch()
        return min(MAX_PIPELINE, max(pipeline_depth(self.spec.iodepth), MIN_PIPELINE * group))

    def path_labels(self) -> None:
        group, k = self.copy_batch(), self.host_buffers()
        if group:
            size = format_size(group * self.spec.block_size)
            self.labels.append(
                f"ring of {k} pinned buffers per worker, copies of {group} block{'s' if group > 1 else ''} "
                f"({size}) while the next are read"
            )
        else:
            self.labels.append(f"pipelined: reads go on while copies land, up to {k} pinned buffers per worker")

    def environment(self):
        env = super().environment()
        env["blocks_per_copy"] = self.copy_batch() or 1
        return env
