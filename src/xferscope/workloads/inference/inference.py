"""What ``workload kvcache`` and ``workload load`` share: the paths checked before anything is written, the
GPUs' free memory asked of a process of its own, a ``TransferJob`` (or a library's load) run in a process of its
own, and the paths run side by side in rotated rounds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xferscope.gpus import gpu_count
from xferscope.isolation import Channel
from xferscope.workloads.common.gpu_memory import measured_free
from xferscope.workloads.common.process_run import WorkloadChild, WorkloadOutcome
from xferscope.workloads.inference import transfer_process
from xferscope.workloads.inference.transfer import TransferTick
from xferscope.workloads.inference.transfer_process import TransferJob, check_gpu_memory


def gpu_present() -> bool:

    return gpu_count()[0] > 0


def check_memory_before(jobs: Sequence[TransferJob]) -> None:
    """Every job's buffers fit its GPUs' free memory, before a data set is written or a run starts."""

    gpus = sorted({g for j in jobs for g in j.gpu_needs()})
    if not gpus:
        return
    free = measured_free(gpus)
    for j in jobs:
        check_gpu_memory(j, free)


class JobRunner:
    """Runs one ``TransferJob`` at a time in the engine's process; ``stop()`` from any thread ends the one in
    flight (its jobs done so far kept) and any that would follow."""

    def __init__(self) -> None:
        self.stopped = False
        self._child: WorkloadChild | None = None

    def stop(self) -> None:
        self.stopped = True
        child = self._child
        if child is not None:
            child.stop()

    def run(
        self,
        job: Any,
        what: str,
        on_tick: Callable[[Any], None] | None = None,
        on_ready: Callable[[], None] | None = None,
        serve: Callable[[Channel], None] | None = None,
    ) -> tuple[WorkloadOutcome, list]:
        """The outcome and every job done (those the ticks carried, where the process died before its end);
        ``on_ready`` as ``WorkloadChild.execute``'s (the ranks of an MPI job start together there). ``serve``: the
        process's side, a ``TransferJob``'s where not given (a library's load: ``library_load.serve``)."""

        child = self._child = WorkloadChild(serve or transfer_process.serve, what, job.path)
        if self.stopped:
            child.stop()
        seen: list = []

        def tick(progress: TransferTick) -> None:
            seen.extend(progress.new)
            if on_tick is not None:
                on_tick(progress)

        try:
            out = child.execute(job, tick, on_ready)
        finally:
            self._child = None
        done = out.payload.done if out.payload is not None else seen
        return out, done
