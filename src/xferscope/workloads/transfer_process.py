"""A ``transfer`` run in the engine's own process (over ``process_host``'s channel), for the inference
workloads: the job is a ``TransferJob``, the payload at the end the jobs done, the seconds, each worker's CPU
and, with ``verify``, what the bytes landed say against the files.

Set-up (GPU memory checked, buffers, pinned staging, streams, cuFile's driver) happens before "ready", outside
the timed region; everything is freed by ``close``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xferscope.errors import SpecError
from xferscope.isolation import Channel
from xferscope.units import format_bytes
from xferscope.workloads.fetchers import Slot, host_slot, make_fetcher
from xferscope.workloads.process_host import serve_with
from xferscope.workloads.transfer import Files, JobSource, TransferRun, Worker

#: share of a GPU's free memory the buffers may take
MEMORY_SHARE = 0.9
PATH_WORDS = {
    "host": "read into host memory",
    "mmap": "the file mapped and copied from pageable memory (as safetensors)",
    "bounce": "pinned staging, each copy waited for",
    "bounce-async": "two pinned staging buffers taking turns",
    "cufile": "cuFileRead into GPU memory",
}


@dataclass
class TransferJob:
    path: str  # host, mmap, bounce, bounce-async, cufile
    files: Files
    block_size: int
    worker_gpus: list[int | None]
    worker_buffer: int  # bytes of each worker's own buffer (0: none)
    buffers: list[tuple[int | None, int]]  # shared buffers: (GPU or None for host memory, bytes)
    source: JobSource
    duration: float | None = None
    interval: float = 0.5
    marks: bool = False
    host_gpu: int | None = None  # host buffers pinned through this GPU's context; None: plain host memory
    verify: bool = False
    memory_option: str = "gpu"
    memory_fix: str = ""

    def gpu_needs(self) -> dict[int, int]:
        need: dict[int, int] = {}
        for g in self.worker_gpus:
            if g is not None and self.worker_buffer:
                need[g] = need.get(g, 0) + self.worker_buffer
        for g, n in self.buffers:
            if g is not None:
                need[g] = need.get(g, 0) + n
        return need

    @property
    def uses_gpu(self) -> bool:
        return bool(self.gpu_needs()) or self.host_gpu is not None or any(g is not None for g in self.worker_gpus)


def check_gpu_memory(job: TransferJob, free: dict[int, int]) -> None:
    for g, need in sorted(job.gpu_needs().items()):
        have = free.get(g)
        if have is not None and need > have * MEMORY_SHARE:
            raise SpecError(
                job.memory_option,
                f"the buffers on GPU {g} need {format_bytes(need)}, more than its free memory allows "
                f"({format_bytes(have)} free){': ' + job.memory_fix if job.memory_fix else ''}",
            )


class TransferSetup:
    def __init__(self, job: TransferJob):
        self.job = job
        self.labels: list[str] = []
        self.environment: dict[str, Any] = {}
        self.resources: Any = None
        self.workers: list[Worker] = []
        self.slots: list[Slot] = []
        self._host: list[Slot] = []

    def build(self) -> None:
        job = self.job
        if job.uses_gpu:
            from xferscope.engines import gpu_setup

            reason = gpu_setup.unavailable_reason()
            if reason:
                raise SpecError("path", f"{job.path} needs a GPU: {reason}")
            self.resources = gpu_setup.GpuResources()
            gpus = sorted(job.gpu_needs())
            free = {}
            for g in gpus:
                self.resources.context(g)
                free[g] = gpu_setup.memory_info(g)[0]
            check_gpu_memory(job, free)
            if gpus:
                from xferscope.engines.gpu_native import gpu_environment

                self.environment.update(gpu_environment(gpus))
        for buffer_gpu, n in job.buffers:
            self.slots.append(self._slot(buffer_gpu, n))
        for i, gpu in enumerate(job.worker_gpus):
            own = self._slot(gpu, job.worker_buffer) if job.worker_buffer else None
            fetcher = make_fetcher(job.path, job.files, job.block_size, gpu, self.resources)
            bind = (lambda g=gpu: self.resources.context(g)) if gpu is not None else (lambda: None)
            self.workers.append(Worker(i, fetcher, own, gpu, bind))
        self.labels.append("O_DIRECT" if job.files.direct else "buffered (page cache)")
        self.labels.append(PATH_WORDS[job.path])
        if job.path in ("bounce", "bounce-async"):
            self.labels.append(f"staging of {format_bytes(job.block_size)} per read")
        if job.path == "cufile":
            from xferscope.engines import cufile_driver

            self.labels.append(cufile_driver.driver_mode().label + ", GPU buffers not registered")

    def _slot(self, gpu: int | None, size: int) -> Slot:
        if gpu is not None:
            return Slot(size, dev=self.resources.device_memory(gpu, size))
        if self.job.host_gpu is not None:
            addr = self.resources.pinned_memory(self.job.host_gpu, size)
            return Slot(size, host=memoryview((ctypes.c_char * size).from_address(addr)).cast("B"))
        slot = host_slot(size)
        self._host.append(slot)
        return slot

    def run(self, stop: threading.Event, on_tick: Callable[[Any], None]) -> tuple[Any, BaseException | None]:
        job = self.job
        run = TransferRun(
            job.source,
            self.workers,
            self.slots,
            duration=job.duration,
            interval=job.interval,
            marks=job.marks,
        )
        seconds = run.run(stop, on_tick)
        payload: dict[str, Any] = {
            "seconds": seconds,
            "done": run.done,
            "worker_cpu": [w.cpu_s for w in self.workers],
            "verified": None,
        }
        if job.verify and run.error is None and not stop.is_set():
            payload["verified"] = self.verify()
        return payload, run.error

    def verify(self) -> tuple[int, int, str | None]:
        """(pieces checked, pieces whose bytes differ from the file's, the first of them) after the run: every
        piece of a shared source (its pieces land in the shared buffers), read back from where it landed."""
        job = self.job
        checked = bad = 0
        first = None
        fds: dict[int, int] = {}
        try:
            k = 0
            while (j := job.source.job(0, k)) is not None:
                k += 1
                for p in j.pieces:
                    if p.file not in fds:
                        fds[p.file] = os.open(job.files.files[p.file].path, os.O_RDONLY)
                    want = os.pread(fds[p.file], p.length, p.offset)
                    got = self._landed(self.slots[p.buffer], job.buffers[p.buffer][0], p.at, p.length)
                    checked += 1
                    if got != want:
                        bad += 1
                        name = os.path.basename(job.files.files[p.file].path)
                        first = first or f"{name} bytes {p.offset}-{p.offset + p.length}"
        finally:
            for fd in fds.values():
                os.close(fd)
        return checked, bad, first

    def _landed(self, slot: Slot, gpu: int | None, at: int, n: int) -> bytes:
        if slot.host is not None:
            return bytes(slot.host[at : at + n])
        from xferscope.engines import gpu_setup

        assert gpu is not None and slot.dev is not None
        self.resources.context(gpu)
        out = bytearray(n)
        gpu_setup.check(gpu_setup.driver().cuMemcpyDtoH(out, slot.dev + at, n), "cuMemcpyDtoH")
        return bytes(out)

    def close(self) -> None:
        for w in self.workers:
            try:
                w.fetcher.close()
            except Exception as exc:
                print(f"xferscope: closing a reader failed: {exc!r}", file=sys.stderr)
        for s in self._host:
            with contextlib.suppress(Exception):
                s.close()
        self._host.clear()
        if self.resources is not None:
            self.resources.release()


def serve(channel: Channel) -> None:
    serve_with(channel, TransferSetup)
