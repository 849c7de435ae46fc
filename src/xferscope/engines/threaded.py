"""Engines whose workers are Python threads calling a library that releases the GIL while it works (cuFile's
batch and stream APIs, KvikIO): each worker's GPU, device blocks, offsets and handle, the timed region and the
counters (``Recorder``, in the native core's histogram buckets), start, stop and close. A path adds what its
library needs: how a worker's handle is opened (``open_worker``), anything more per worker (``prepare_worker``),
and its loop (``run_worker``)."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from xferscope.engines import gpu_setup
from xferscope.engines.base import Engine, Snapshot
from xferscope.engines.recorder import Recorder


class Cursor:
    """Offsets and directions of one worker, in the native core's order: sequential slices
    wrapping at the end, or uniform random blocks, with the read share of --rwmix."""

    def __init__(self, spec, start: int, length: int, worker: int):
        self.bs = spec.block_size
        self.start = start
        self.blocks = max(1, length // self.bs)
        self.random = spec.is_random
        self.read_pct = spec.read_pct
        self.pos = 0
        self.rng = random.Random(spec.seed * 1_000_003 + worker)

    def next(self) -> tuple[int, bool]:
        if self.random:
            off = self.start + self.rng.randrange(self.blocks) * self.bs
        else:
            off = self.start + self.pos * self.bs
            self.pos = (self.pos + 1) % self.blocks
        if self.read_pct >= 100:
            return off, False
        return off, self.read_pct <= 0 or self.rng.randrange(100) >= self.read_pct


@dataclass
class ThreadWorker:
    """One Python worker: its GPU, device blocks, handle (a cuFile handle, a KvikIO file) and offsets, and what its
    library's API needs: a batch handle with its parameter and event arrays (numpy, cuFile's dtypes), a registered
    stream with an event per slot and the async calls' argument arrays (ctypes), or a buffer object over its device
    blocks (KvikIO)."""

    gpu: int
    dev: int
    handle: Any
    cursor: Cursor
    batch: int = 0
    params: Any = None
    batch_events: Any = None
    stream: Any = None
    stream_events: list[Any] = field(default_factory=list)
    size: Any = None
    file_off: Any = None
    buf_off: Any = None
    done: Any = None
    buffer: Any = None


class ThreadEngine(Engine):
    """Workers are Python threads; counters in a ``Recorder``; every worker has a GPU."""

    worker_gpus: list[int]  # every worker has a GPU here

    def __init__(self, spec, target):
        super().__init__(spec, target)
        self.worker_gpus = gpu_setup.assign_gpus(spec.gpus, spec.workers)
        self.resources = gpu_setup.GpuResources()
        self.recorder = Recorder(spec.workers)
        self._workers: list[ThreadWorker] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._go = threading.Event()
        self._ready = threading.Barrier(spec.workers + 1)
        self._closed = False
        self._deadline_ns = int(spec.duration * 1e9) if spec.duration else 0
        self._bytes_limit = 0
        if spec.total_bytes:
            per_worker = spec.total_bytes // spec.workers
            self._bytes_limit = max(spec.block_size, per_worker // spec.block_size * spec.block_size)

    @property
    def depth(self) -> int:
        return max(1, self.spec.iodepth)

    # -- what a path adds ------------------------------------------------------------
    def open_path(self) -> None:
        """Before the workers: the library's driver, the files."""

    def open_worker(self, index: int, gpu: int, dev: int, size: int) -> Any:
        """Worker ``index``'s handle on its file (``dev``: its ``size`` bytes of GPU memory)."""
        raise NotImplementedError

    def first_worker_opened(self) -> None:
        """After the first worker's handle: what one probe can tell of the path (its mode, say)."""

    def prepare_worker(self, worker: ThreadWorker) -> None:
        """Path-specific set-up of one worker (a batch handle, a registered stream)."""

    def run_worker(self, index: int, worker: ThreadWorker) -> None:
        raise NotImplementedError

    def close_path(self) -> None:
        """After the GPU resources are freed: what ``open_path`` opened."""

    # -- protocol ------------------------------------------------------------------
    def prepare(self) -> None:
        spec, res = self.spec, self.resources
        self.open_path()
        size = self.depth * spec.block_size
        for i, gpu in enumerate(self.worker_gpus):
            res.context(gpu)
            dev = res.device_memory(gpu, size)
            if spec.writes:
                res.fill_device(gpu, dev, size, spec.seed)
            start, length = self.target.worker_regions[i]
            worker = ThreadWorker(gpu, dev, self.open_worker(i, gpu, dev, size), Cursor(spec, start, length, i))
            if i == 0:
                self.first_worker_opened()
            self.prepare_worker(worker)
            self._workers.append(worker)

    def start(self) -> None:
        for i, worker in enumerate(self._workers):
            t = threading.Thread(
                target=self._thread_main, args=(i, worker), name=f"xferscope-{self.name}-{i}", daemon=True
            )
            self._threads.append(t)
            t.start()
        self._ready.wait()
        self.recorder.begin()
        self._go.set()

    def _thread_main(self, index: int, worker: ThreadWorker) -> None:
        try:
            try:
                self.resources.context(worker.gpu)
            except Exception as exc:
                self.recorder.fail(f"worker {index}: {exc}")
            self._ready.wait()
            self._go.wait()
            if not self.recorder.failed:
                self.run_worker(index, worker)
        except threading.BrokenBarrierError:
            pass
        except Exception as exc:  # a library or CUDA error: the run fails with it, the others stop
            self.recorder.fail(f"worker {index}: {exc}")
            self._stop.set()
        finally:
            self.recorder.finish(index)

    def keep_going(self, done_bytes: int) -> bool:
        if self._stop.is_set() or self.recorder.failed:
            return False
        if self._deadline_ns and self.recorder.elapsed_ns() >= self._deadline_ns:
            return False
        return not (self._bytes_limit and done_bytes >= self._bytes_limit)

    def snapshot(self) -> Snapshot:
        return self.recorder.snapshot()

    def stop(self) -> None:
        self._stop.set()

    def wait(self, timeout: float) -> bool:
        if not self._threads:
            return True
        return self.recorder.all_done.wait(None if timeout is None or timeout < 0 else timeout)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._go.set()
        if not self._threads:
            self._ready.abort()
        for t in self._threads:
            t.join()
        try:
            self.resources.release()
        finally:
            self.close_path()
