"""Split requests (``--split SIZE``): one request of the block size as parallel sub-requests of SIZE.

KvikIO reads a large buffer as tasks of ``task_size`` (4 MiB by default) on its
thread pool; ``--split`` does the same inside each xferscope worker: a request
of ``block_size`` bytes becomes ``ceil(block_size / split)`` sub-requests, the
last one shorter when SIZE does not divide the block, issued in parallel by the
worker and its lanes (helper threads, up to ``MAX_LANES`` per worker, the
worker included). The request completes when every sub-request has; its
latency is the whole request's. The native core (``_iocore``) plans the
sub-requests the same way as :func:`plan_split`.

:func:`split_advice` is the one rule for when a run would clearly gain from
splitting; every output that gives advice (the compare table's note, the
saturation finder) calls it.
"""

from __future__ import annotations

from xferscope.spec import SPLIT_PATHS
from xferscope.units import format_size

__all__ = ["ADVISED_SPLIT", "MAX_LANES", "SPLIT_PATHS", "lanes", "plan_split", "split_advice", "split_label"]

#: threads per worker that issue sub-requests, the worker included (the native core's MAX_LANES)
MAX_LANES = 16
#: KvikIO's default task size, and what the advice suggests
ADVISED_SPLIT = 4 << 20
#: blocks at least this large gain from splitting through cuFile's compat mode (measured: KvikIO's
#: 16 MiB reads through cuFile compat, one thread, 1041-1292 MiB/s for tasks of 1-16 MiB, 4 MiB best)
ADVICE_MIN_BLOCK = 8 << 20


def plan_split(block_size: int, split: int | None) -> list[tuple[int, int]]:
    """The sub-requests of one request: (offset within the block, length), in order.

    No split (None, 0, or a split not smaller than the block) is one sub-request: the block.
    """
    if block_size <= 0:
        raise ValueError("block size must be positive")
    if not split or split >= block_size:
        return [(0, block_size)]
    return [(off, min(split, block_size - off)) for off in range(0, block_size, split)]


def lanes(block_size: int, split: int | None) -> int:
    """Sub-requests in flight at once per worker (the worker and its lanes)."""
    return min(len(plan_split(block_size, split)), MAX_LANES)


def split_label(block_size: int, split: int | None) -> str | None:
    """What a run's labels say about splitting, or None without --split."""
    if not split:
        return None
    plan = plan_split(block_size, split)
    if len(plan) == 1:
        return f"--split {format_size(split)} not used: blocks of {format_size(block_size)} are not larger"
    last = plan[-1][1]
    tail = f", the last {format_size(last)}" if last != split else ""
    n = lanes(block_size, split)
    return (
        f"each {format_size(block_size)} request as {len(plan)} sub-requests of {format_size(split)}{tail}, "
        f"{n} in flight (--split)"
    )


def split_advice(path: str, block_size: int, split: int | None, cufile_mode: str | None) -> str | None:
    """A one-line suggestion to use --split where a run would clearly gain from it, else None.

    The rule: a cuFile read path (``cufile``) in compat mode, with blocks of ``ADVICE_MIN_BLOCK``
    or more, not split yet. In compat mode cuFile moves data through its own POSIX bounce path,
    where smaller requests went faster even one at a time (KvikIO's task-size sweep on a virtio
    disk: 4 MiB tasks 1.24x 16 MiB ones), and parallel ones faster still.
    """
    if path != "cufile" or cufile_mode != "compat" or split or block_size < ADVICE_MIN_BLOCK:
        return None
    size = format_size(ADVISED_SPLIT)
    return (
        f"{path}: cuFile in compat mode moves {format_size(block_size)} requests faster as parallel "
        f"{size} sub-requests (KvikIO's default task size): try --split {size}"
    )
