"""Reads into buffers by a path, timed: the engine under ``workload kvcache`` and ``workload load``.

A run is a set of ``Job``s, each a list of ``Piece``s (one read each) that one worker does in order; a job's
time runs from its first read to its last byte landed (the async path's copies waited for). Workers take jobs
from one shared sequence (``shared``: a model load's pieces) or each from its own (the concurrent clients of a
KV-cache restore). A piece lands at ``at`` in buffer ``buffer`` (-1: the worker's own buffer), where ``at`` is
placed so that an O_DIRECT read of its 4 KiB-aligned span fits (``place``).

Runs in the engine's process (``transfer_process``); tests run it here with host buffers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from xferscope.workloads.common.data_files import DataFile, SampleRef
from xferscope.workloads.common.fetchers import Fetcher, Slot
from xferscope.workloads.common.generated import ALIGN


@dataclass(frozen=True)
class Piece(SampleRef):
    buffer: int = -1
    at: int = 0  # where the piece's first byte lands in its buffer


@dataclass(frozen=True)
class Job:
    tag: int  # the request number, or the shard a piece belongs to
    pieces: tuple[Piece, ...]
    gpu: int | None = None


class JobSource(Protocol):
    shared: bool

    def job(self, worker: int, k: int) -> Job | None:
        """The k-th job (of the shared sequence, or of ``worker``'s own); None when there are no more."""
        ...


class Window:
    """A shared sequence of jobs from ``start`` on, round to the beginning, each once (a shape probe's trial)."""

    shared = True

    def __init__(self, jobs: Sequence[Job], start: int):
        self.jobs, self.start = jobs, start

    def job(self, worker: int, k: int) -> Job | None:
        n = len(self.jobs)
        return self.jobs[(self.start + k) % n] if k < n else None


@dataclass
class Files:
    """The files a run reads (what the fetchers need of a data set)."""

    files: list[DataFile]
    direct: bool


def place(cursor: int, offset: int, length: int, direct: bool) -> tuple[int, int]:
    """(at, next cursor): a piece read from ``offset`` lands at ``at`` >= cursor with ``at`` congruent to
    ``offset`` modulo 4 KiB, so that the aligned span of an O_DIRECT read lands on a 4 KiB boundary; the
    next piece starts after the span."""
    head = offset % ALIGN
    base = -(-cursor // ALIGN) * ALIGN
    end = -(-(offset + length) // ALIGN) * ALIGN
    return base + head, base + (end - (offset - head)) if direct else base + head + length


@dataclass
class JobDone:
    tag: int
    worker: int
    gpu: int | None
    start_s: float  # from the run's start
    seconds: float
    bytes: int
    marks: list[float] = field(default_factory=list)  # seconds from the job's start to each piece's return


@dataclass
class TransferEnd:
    """What a transfer run's process sends at its end: the seconds it ran, every job done, each worker's CPU
    seconds, the check of the data read (pieces checked, pieces that differ, the first of them; None: not
    checked), and a shape probe's trials (split, threads, bytes, seconds, round)."""

    seconds: float = 0.0
    done: list[JobDone] = field(default_factory=list)
    worker_cpu: list[float | None] = field(default_factory=list)
    verified: tuple[int, int, str | None] | None = None
    trials: list[tuple[int, int, int, float, int]] = field(default_factory=list)


@dataclass(frozen=True)
class TransferTick:
    """What a live view shows of a transfer run ``t`` s in: the jobs done since the last tick, and how many in all."""

    t: float
    new: list[JobDone]
    jobs: int


@dataclass
class TransferWorker:
    index: int
    fetcher: Fetcher
    slot: Slot | None  # its own buffer, for pieces with buffer -1
    gpu: int | None
    bind: Callable[[], None] = lambda: None
    cpu_s: float = 0.0
    error: BaseException | None = None


class TransferRun:
    """Workers doing jobs until the source runs dry, ``stop`` is set or ``duration`` has passed."""

    def __init__(
        self,
        source: JobSource,
        workers: Sequence[TransferWorker],
        slots: Sequence[Slot],
        *,
        duration: float | None = None,
        interval: float = 0.5,
        marks: bool = False,
    ):
        self.source, self.workers, self.slots = source, list(workers), list(slots)
        self.duration, self.interval, self.marks = duration, interval, marks
        self.done: list[JobDone] = []
        self._lock = threading.Lock()
        self._next_shared = 0
        self._stop = threading.Event()
        self.seconds = 0.0

    def _next(self, worker: int, k: int) -> Job | None:
        if self._stop.is_set():
            return None
        if self.duration is not None and time.perf_counter() - self._clock0 >= self.duration:
            return None
        if self.source.shared:
            with self._lock:
                k = self._next_shared
                self._next_shared += 1
        return self.source.job(worker, k)

    def _work(self, w: TransferWorker) -> None:
        cpu0 = time.thread_time()
        try:
            w.bind()
            k = 0
            while (job := self._next(w.index, k)) is not None:
                k += 1
                t0 = time.perf_counter()
                marks = []
                nbytes = 0
                for p in job.pieces:
                    slot = w.slot if p.buffer < 0 else self.slots[p.buffer]
                    assert slot is not None
                    start = w.fetcher.extent(p)[0]  # an O_DIRECT read starts at the 4 KiB boundary below
                    w.fetcher.read(p, slot, p.at - (p.offset - start))
                    nbytes += p.length
                    if self.marks:
                        marks.append(time.perf_counter() - t0)
                w.fetcher.batch_done()
                t1 = time.perf_counter()
                with self._lock:
                    self.done.append(JobDone(job.tag, w.index, w.gpu, t0 - self._clock0, t1 - t0, nbytes, marks))
        except BaseException as exc:
            w.error = exc
            self._stop.set()
        finally:
            w.cpu_s += time.thread_time() - cpu0

    def run(self, stop: threading.Event, on_tick: Callable[[TransferTick], None] | None = None) -> float:
        self._clock0 = time.perf_counter()
        threads = [
            threading.Thread(target=self._work, args=(w,), name=f"xferscope-transfer-{w.index}", daemon=True)
            for w in self.workers
        ]
        for t in threads:
            t.start()
        sent = 0
        while True:
            for t in threads:
                t.join(self.interval / max(1, len(threads)))
            if stop.is_set():
                self._stop.set()
            alive = any(t.is_alive() for t in threads)
            if on_tick is not None:
                with self._lock:
                    new = self.done[sent:]
                    sent = len(self.done)
                on_tick(TransferTick(time.perf_counter() - self._clock0, new, sent))
            if not alive:
                break
        self.seconds = time.perf_counter() - self._clock0
        return self.seconds

    @property
    def error(self) -> BaseException | None:
        return next((w.error for w in self.workers if w.error is not None), None)
