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
from dataclasses import dataclass, field
from typing import Any

from xferscope.engines import gpu_setup, page_cache
from xferscope.errors import SpecError
from xferscope.isolation import Channel
from xferscope.records import WorkloadEnvironment
from xferscope.units import format_bytes
from xferscope.workloads.common.fetchers import Fetcher, Slot, host_slot, make_fetcher
from xferscope.workloads.common.gpu_memory import MEMORY_SHARE
from xferscope.workloads.common.process_host import serve_with
from xferscope.workloads.inference.transfer import (
    Files,
    Job,
    JobSource,
    TransferEnd,
    TransferRun,
    TransferWorker,
    Window,
)

#: share of a GPU's free memory the buffers may take
PATH_WORDS = {
    "host": "read into host memory",
    "mmap": "the file mapped and copied from pageable memory (as safetensors)",
    "bounce": "pinned staging, each copy waited for",
    "bounce-async": "pinned staging as run's bounce-async (one buffer or groups taking turns, as measured)",
    "cufile": "cuFileRead into GPU memory",
}


@dataclass
class ShapeTrial:
    """One point of a request-shape probe: ``threads`` workers reading ``jobs`` (pieces of at most ``split``)
    from the ``at``-th share of them on, for the job's ``duration``."""

    split: int
    threads: int
    jobs: list[Job]
    at: float = 0.0

    def source(self, shift: float = 0.0) -> Window:
        return Window(self.jobs, int(len(self.jobs) * ((self.at + shift) % 1.0)))


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
    #: a shape probe instead of one run: each trial in turn, then the ``finalists`` fastest again, each
    #: ``final_repeats`` times for ``final_duration``, in rotated order; their figures the payload's "trials"
    trials: list[ShapeTrial] = field(default_factory=list)
    finalists: int = 0
    final_repeats: int = 2
    final_duration: float = 0.0

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
        self.environment: WorkloadEnvironment = {}
        self.resources: Any = None
        self.workers: list[TransferWorker] = []
        self.slots: list[Slot] = []
        self._host: list[Slot] = []
        self._fetchers: dict[int, list[Fetcher]] = {}  # a shape probe's readers, by piece size

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
        if not job.trials:
            self.workers = self._workers(job.block_size, len(job.worker_gpus))
        self.labels.append("O_DIRECT" if job.files.direct else "buffered (page cache)")
        self.labels.append(PATH_WORDS[job.path])
        if job.path in ("bounce", "bounce-async"):
            self.labels.append(f"staging of {format_bytes(job.block_size)} per read")
        if job.path == "cufile":
            from xferscope.engines import cufile_driver

            self.labels.append(cufile_driver.driver_mode().label + ", GPU buffers not registered")

    def _workers(self, block_size: int, count: int) -> list[TransferWorker]:
        job, workers = self.job, []
        try:
            for i in range(count):
                gpu = job.worker_gpus[i % len(job.worker_gpus)]
                own = self._slot(gpu, job.worker_buffer) if job.worker_buffer else None
                fetcher = make_fetcher(job.path, job.files, block_size, gpu, self.resources)
                workers.append(TransferWorker(i, fetcher, own, gpu, self._bind(gpu)))
        except BaseException:
            _close_workers(workers)
            raise
        return workers

    def _bind(self, gpu: int | None) -> Callable[[], None]:
        """What a reader thread calls first: its GPU's context made current (nothing for host memory)."""
        return (lambda: self.resources.context(gpu)) if gpu is not None else (lambda: None)

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
        if job.trials:
            return self._probe(stop, on_tick)
        run = TransferRun(
            job.source,
            self.workers,
            self.slots,
            duration=job.duration,
            interval=job.interval,
            marks=job.marks,
        )
        seconds = run.run(stop, on_tick)
        payload = TransferEnd(seconds, run.done, [w.cpu_s for w in self.workers])
        if job.verify and run.error is None and not stop.is_set():
            payload.verified = self.verify()
        return payload, run.error

    def _probe(self, stop: threading.Event, on_tick: Callable[[Any], None]) -> tuple[Any, BaseException | None]:
        """Each trial in turn, then the fastest ``finalists`` again, ``final_repeats`` times each in rotated order,
        each from another place in the data: (split, threads, bytes, seconds, round) of every trial. The readers
        of a piece size are made once, for the most threads any trial of it has. Where the files are read through
        the page cache, their pages are evicted after each trial (a probe must not warm the cache for the load
        it serves)."""
        job = self.job
        payload = TransferEnd()
        figures = payload.trials
        rate: dict[int, float] = {}  # bytes/s of each first-round trial, by its index
        plan = [(i, 0.0, job.duration, 1) for i in range(len(job.trials))]
        while plan:
            i, shift, seconds, rnd = plan.pop(0)
            if stop.is_set():
                break
            trial = job.trials[i]
            run = self._trial(trial, shift, seconds, stop, on_tick)
            if run.error is not None:
                return payload, run.error
            nbytes = sum(d.bytes for d in run.done)
            figures.append((trial.split, trial.threads, nbytes, run.seconds, rnd))
            if rnd == 1:
                rate[i] = nbytes / run.seconds if run.seconds > 0 else 0.0
                if len(rate) == len(job.trials) and job.finalists:
                    best = sorted(rate, key=lambda k: -rate[k])[: job.finalists]
                    for r in range(job.final_repeats):
                        order = best[r % len(best) :] + best[: r % len(best)]
                        plan += [(k, 0.5 + 0.2 * r + 0.05 * n, job.final_duration, 2) for n, k in enumerate(order)]
        return payload, None

    def _trial(self, trial: ShapeTrial, shift: float, seconds: float | None, stop, on_tick) -> TransferRun:

        fetchers = self._fetchers.get(trial.split)
        if fetchers is None:
            most = max(t.threads for t in self.job.trials if t.split == trial.split)
            made = self._workers(trial.split, most)
            self.workers += made  # closed with the setup
            fetchers = self._fetchers[trial.split] = [w.fetcher for w in made]
        gpus = self.job.worker_gpus
        workers = [
            TransferWorker(i, f, None, gpus[i % len(gpus)], self._bind(gpus[i % len(gpus)]))
            for i, f in enumerate(fetchers[: trial.threads])
        ]
        run = TransferRun(trial.source(shift), workers, self.slots, duration=seconds, interval=self.job.interval)
        try:
            run.run(stop, on_tick)
        finally:
            if not self.job.files.direct:
                page_cache.evict_files([f.path for f in self.job.files.files])
        return run

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

        assert gpu is not None and slot.dev is not None
        self.resources.context(gpu)
        out = bytearray(n)
        gpu_setup.check(gpu_setup.driver().cuMemcpyDtoH(out, slot.dev + at, n), "cuMemcpyDtoH")
        return bytes(out)

    def close(self) -> None:
        _close_workers(self.workers)
        for s in self._host:
            with contextlib.suppress(Exception):
                s.close()
        self._host.clear()
        if self.resources is not None:
            self.resources.release()


def _close_workers(workers: list[TransferWorker]) -> None:
    for w in workers:
        try:
            w.fetcher.close()
        except Exception as exc:
            print(f"xferscope: closing a reader failed: {exc!r}", file=sys.stderr)


def serve(channel: Channel) -> None:
    serve_with(channel, TransferSetup)
