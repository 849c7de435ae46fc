"""bounce: storage -> pinned host memory -> GPU, the path every GPU program has without GDS.

``bounce`` (gdsio CPU_GPU, ``-x 2``): each worker reads a block into a pinned
buffer, copies it to the GPU (cuMemcpyHtoDAsync) and waits for the copy before
the next read. Writes go GPU -> pinned host -> storage.

``bounce-async`` (gdsio CPU_ASYNC_GPU, ``-x 3``): one read in flight per worker,
as ``bounce`` and gdsio have, into as few pinned buffers as keep the copies off
the reads' path. On virtual disks where a read lands decides its speed (1 MiB
reads 8-13% slower into two pinned buffers taking turns than into one, 35%
slower into twelve, on the machine it was measured on; ``xferscope doctor``
measures it here), and copies can take 50-70 us to land whatever their size,
so neither of two ways wins everywhere, and each worker measures both as it
runs (the native core's ring):

- one buffer, each copy waited for, as ``bounce`` (the wait sleeps until the
  copy is due, then asks);
- groups of buffers taking turns: the copy of one lands while another is read
  into. Blocks under 256 KiB go in groups of up to 256 KiB, one copy a group
  (a copy call costs about as much CPU as a small read); larger blocks a buffer
  a group. The next group is the lowest-numbered one whose copy has landed: two
  take turns while copies keep up, more (up to 8, 32 MiB at most) only while
  they fall behind, as from the page cache.

The workers try both in alternating phases of 40 ms on the run's clock (all
the same way at once: on a shared disk one worker's way changes the others'
reads), after a first phase of groups taking turns that is not timed, six
phases at the start and again every 10 s; they compare the time a block takes
each way and go on with the faster (one buffer only when 2% faster: its waits
cost CPU); a worker whose block outlasts a phase stays in it until one is
timed. The label says what each worker chose, from which figures.
``--iodepth`` is not used by reads (one in flight). Writes go through K =
--iodepth (at least 3) buffers: the data of the next write is copied from the
GPU while this one is written.

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

from xferscope import _iocore
from xferscope.engines.gpu_native import PINNED_ALIGN, GpuNativeEngine
from xferscope.engines.native import NativeOptions
from xferscope.units import format_size

MAX_PIPELINE = 64  # the native core's limit of buffers per worker
#: writes: one being written, one being filled from the GPU, one spare for a copy that lands late
MIN_PIPELINE = 3
#: reads: a group of blocks taking turns holds this many bytes at most (its blocks go to the GPU in one copy)
COPY_GROUP_BYTES = 256 << 10
MAX_COPY_GROUP = 16
#: reads: groups that may take turns (more than two only while copies fall behind), and their pinned bytes at most
MAX_GROUPS = 8
MAX_GROUPS_BYTES = 32 << 20


def pipeline_depth(iodepth: int) -> int:
    """Pinned buffers per worker for bounce-async writes: --iodepth, at least three."""
    return max(MIN_PIPELINE, min(iodepth, MAX_PIPELINE))


def copy_group(block_size: int) -> int:
    """Blocks a group of bounce-async reads holds, one copy a group: small blocks in groups of up to 256 KiB (a
    copy call costs about as much CPU as a small read; a larger group is a larger set of buffers to read into),
    blocks of 256 KiB and more a copy each. Buffers that do not lie side by side (blocks not a multiple of 4 KiB)
    go one a copy."""
    if block_size % PINNED_ALIGN:
        return 1
    return max(1, min(MAX_COPY_GROUP, COPY_GROUP_BYTES // block_size))


def max_groups(group_bytes: int) -> int:
    """Groups of bounce-async reads there are buffers for: 8, or as many as fit 32 MiB, two at least."""
    return max(2, min(MAX_GROUPS, MAX_GROUPS_BYTES // group_bytes))


class BounceEngine(GpuNativeEngine):
    name = "bounce"
    xfer_type = "CPU_GPU"
    description = "storage -> pinned host -> GPU, each copy waited for (gdsio CPU_GPU)"
    native_mode = _iocore.MODE_BOUNCE

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
    description = "storage -> pinned host -> GPU, copies off the reads' path where they matter (gdsio CPU_ASYNC_GPU)"
    native_mode = _iocore.MODE_BOUNCE_PIPE
    #: how a worker's reads use the buffers: chosen as it runs (TURNS_AUTO), or fixed (bench/bounce_timeline.py's
    #: variants: TURNS_ALWAYS, two groups taking turns; TURNS_NEVER, one buffer)
    turns = _iocore.TURNS_AUTO
    #: blocks per copy when groups take turns (None: copy_group's), and how many groups at most (None:
    #: max_groups's choice)
    blocks_per_copy: int | None = None
    groups: int | None = None

    def copy_batch(self) -> int:
        """Blocks per copy of the reads' groups; 0 for writes and mixes (the staged pipeline)."""
        if self.spec.writes:
            return 0
        return self.blocks_per_copy or copy_group(self.spec.block_size)

    def host_buffers(self) -> int:
        group = self.copy_batch()
        if not group:
            return pipeline_depth(self.spec.iodepth)
        return min(MAX_PIPELINE, (self.groups or max_groups(group * self.spec.block_size)) * group)

    def native_options(self) -> NativeOptions:
        return {"turns": self.turns}

    def path_labels(self) -> None:
        group, k = self.copy_batch(), self.host_buffers()
        if not group:
            self.labels.append(
                f"pipelined: the next write's data is copied from the GPU while one is written, "
                f"{k} pinned buffers per worker"
            )
            return
        if self.spec.iodepth > 1:
            self.labels.append(f"psync: queue depth {self.spec.iodepth} not used (one read in flight per worker)")

    def after_run(self) -> None:
        """Say what each worker's reads went into, and why: from the native core's account of the run."""
        use = self.buffer_use()
        if use:
            self.labels.append(buffer_use_label(use, self.copy_batch(), self.spec.block_size))

    def buffer_use(self) -> list[tuple[int, bool, int, int]]:
        """Per worker (reads only): (buffers read into, ended on one buffer, its last trial's mean ns a block on
        one buffer and with groups taking turns, 0 where not measured); nothing until every worker has finished
        (before, the native core has not written them)."""
        if self._job is None or not self.copy_batch() or not self._job.wait(0):
            return []
        return [tuple(u) for u in self._job.buffer_use()]

    def environment(self):
        env = super().environment()
        use = self.buffer_use()
        if use:
            env["blocks_per_copy"] = self.copy_batch()
            env["read_buffers_per_worker"] = [u[0] for u in use]
            env["reads_on_one_buffer"] = [u[1] for u in use]
            env["trial_us_a_block"] = [
                {"one_buffer": round(u[2] / 1e3, 1) or None, "taking_turns": round(u[3] / 1e3, 1) or None} for u in use
            ]
        return env


def buffer_use_label(use: list[tuple[int, bool, int, int]], group: int, block_size: int) -> str:
    """One line on what the workers read into (one buffer, or groups taking turns) and the trial that chose it."""
    n = len(use)
    parts = []
    for serial in (True, False):
        mine = [u for u in use if u[1] == serial]
        if not mine:
            continue
        who = "every worker" if len(mine) == n else f"{len(mine)} of {n} workers"
        most = max(u[0] for u in mine)
        if serial:
            how = "1 pinned buffer, each copy waited for"
            if most > 1:
                how += f" ({most} pinned buffers at most, in its trial of groups taking turns)"
        else:
            unit = f"groups of {group} ({format_size(group * block_size)})" if group > 1 else "buffers"
            how = f"{unit} taking turns ({most} pinned buffers at most)"
        timed = [u for u in mine if u[2] and u[3]]
        if timed:
            mid = sorted(timed, key=lambda u: u[2] / u[3])[len(timed) // 2]
            how += (
                f": {mid[2] / 1e3:.0f} against {mid[3] / 1e3:.0f} us a block"
                if serial
                else (f": {mid[3] / 1e3:.0f} against {mid[2] / 1e3:.0f} us a block on one buffer")
            )
        parts.append(f"{who} read into {how}")
    return "; ".join(parts) + (" (measured as it ran)" if any(u[2] and u[3] for u in use) else "")
