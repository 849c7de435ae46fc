"""bounce: storage -> pinned host memory -> GPU, the path every GPU program has without GDS.

``bounce`` (gdsio CPU_GPU, ``-x 2``): each worker reads a block into a pinned
buffer, copies it to the GPU (cuMemcpyHtoDAsync) and waits for the copy before
the next read. Writes go GPU -> pinned host -> storage.

``bounce-async`` (gdsio CPU_ASYNC_GPU, ``-x 3``): K pinned buffers per worker
(K = --iodepth, at least 3) with an event each, and still one read in flight
per worker, as ``bounce`` and gdsio have. Reads go through io_uring: the moment
block n has been read, block n+1's read is submitted, and only then is block
n's copy issued, so the copy call never sits between two reads (where io_uring
is missing, or for writes and split requests, the copy is issued between two
reads). A buffer is free again once its copy has landed (checked without
waiting); the one that landed last is reused first, so two or three buffers
take turns while PCIe is faster than storage, and the worker waits for a copy
only when all K are in flight (PCIe slower than storage). ``--iodepth`` is that
slack, not reads in flight.

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
from xferscope.engines.native import uring_status

MAX_PIPELINE = 64  # the native core's limit of buffers per worker
#: one being read into, one whose copy is in flight, one spare for a copy that lands later than the next read ends
MIN_PIPELINE = 3


#: with io_uring, blocks smaller than this go to the GPU in groups of up to this many bytes, one copy a group
COPY_GROUP_BYTES = 1 << 20
MAX_COPY_GROUP = 16


def pipeline_depth(iodepth: int) -> int:
    """Pinned buffers per worker for bounce-async: --iodepth, at least triple-buffered."""
    return max(MIN_PIPELINE, min(iodepth, MAX_PIPELINE))


def copy_group(block_size: int) -> int:
    """Blocks per copy to the GPU when the reads go through io_uring: small blocks in groups of up to 1 MiB (a
    copy call costs about as much CPU as a 64 KiB read), whole blocks of 1 MiB and more. Buffers that do not lie
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
    description = "storage -> pinned host -> GPU, read of block n+1 overlaps the copy of block n (gdsio CPU_ASYNC_GPU)"
    native_mode = 2  # _iocore.MODE_BOUNCE_PIPE

    def __init__(self, spec, target):
        super().__init__(spec, target)
        #: reads through io_uring (the next read under way while a copy is issued), or why not
        self.uring_ok, self.uring_why = False, ""
        if not spec.writes and not (spec.split and spec.split < spec.block_size):
            self.uring_ok, self.uring_why = uring_status()

    def copy_batch(self) -> int:
        return copy_group(self.spec.block_size) if self.uring_ok else 1

    def host_buffers(self) -> int:
        return min(MAX_PIPELINE, max(pipeline_depth(self.spec.iodepth), MIN_PIPELINE * self.copy_batch()))

    def path_labels(self) -> None:
        self.labels.append(
            f"pipelined: reads go on while copies land, up to {self.host_buffers()} pinned buffers per worker"
        )

    def use_uring(self) -> bool:
        """Reads through io_uring, so that the next one is under way while a copy is issued: for reads that
        are not split, where the kernel has io_uring."""
        if self.uring_ok:
            group = self.copy_batch()
            copies = f"; copies of {group} blocks at a time" if group > 1 else ""
            self.labels.append(
                f"io_uring: the next read is under way while each copy is issued (one read in flight){copies}"
            )
            return True
        if self.uring_why:
            self.labels.append(f"psync: io_uring unavailable ({self.uring_why}); each copy is issued between two reads")
        return False

    def environment(self):
        env = super().environment()
        env["blocks_per_copy"] = self.copy_batch()
        return env
