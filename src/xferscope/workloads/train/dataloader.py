"""``workload train --path dataloader``: the accelerators fed by a PyTorch DataLoader, as most training loops are,
over the same data set, batches and clocks as xferscope's paths.

Per accelerator, a ``torch.utils.data.DataLoader`` over a map-style data set whose item ``n`` is batch ``n`` of the
accelerator's plan (``accelerators.BatchPlan``: DLIO's sharding and shuffle), each sample read with buffered
``os.pread`` (as a Dataset reads a file) into one uint8 tensor: ``batch_size=None``, ``num_workers`` the run's
``--threads``, ``pin_memory=True``, ``prefetch_factor`` from ``--prefetch``, ``persistent_workers=True``. The step
loop is the training loop's: ``next()``, ``.cuda(non_blocking=True)``, the stream synchronised (the step's compute
would wait for the copy on the GPU), then the same compute as the other paths. The loader's workers start with the
clock, as they do at a loop's first ``next()``; the data set's pages are evicted before (a cold start, as the
other paths read with O_DIRECT).
"""

from __future__ import annotations

import itertools
import multiprocessing.util
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypedDict, cast

from xferscope.engines import page_cache
from xferscope.workloads.train.accelerators import Accelerator, BatchPlan
from xferscope.workloads.train.train_data import TrainData
from xferscope.workloads.train.train_spec import TrainSpec

if TYPE_CHECKING:
    from torch.utils.data import Dataset


class BatchDataset:
    """Item ``n``: batch ``n`` of an accelerator's plan, its samples' bytes read one after another into one
    uint8 tensor (the files opened once a worker process)."""

    def __init__(self, data: TrainData, plan: BatchPlan):
        self.data, self.plan = data, plan
        self._fds: dict[int, int] = {}

    def __getitem__(self, number: int) -> Any:
        import torch

        samples = [self.data.samples[i] for i in self.plan.batch(number)]
        out = bytearray(sum(s.length for s in samples))
        view, at = memoryview(out), 0
        for s in samples:
            fd = self._fds.get(s.file)
            if fd is None:
                fd = self._fds[s.file] = os.open(self.data.files[s.file].path, os.O_RDONLY)
            got = os.preadv(fd, [view[at : at + s.length]], s.offset)
            if got != s.length:
                raise OSError(f"{self.data.files[s.file].path}: read {got} of {s.length} bytes at {s.offset}")
            at += s.length
        return torch.frombuffer(out, dtype=torch.uint8) if out else torch.empty(0, dtype=torch.uint8)


class Batches:
    """The batch numbers of a run, in order (an endless run's too): the DataLoader's sampler."""

    def __init__(self, limit: int | None):
        self.limit = limit

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.limit)) if self.limit is not None else itertools.count()


#: torch's own prefetch_factor, where --prefetch leaves it open
DEFAULT_PREFETCH_FACTOR = 2


class LoaderSettings(TypedDict):
    """The DataLoader's keywords this workload sets (its record states them)."""

    batch_size: None  # each item is a whole batch
    num_workers: int
    pin_memory: bool
    prefetch_factor: int
    persistent_workers: bool


def loader_settings(spec: TrainSpec) -> LoaderSettings:
    """The DataLoader's settings, as the record states them: ``--threads`` workers, each ``prefetch_factor``
    batches ahead (torch's 2, or ``--prefetch`` batches ahead over all the workers)."""
    workers = spec.read_threads
    ahead = DEFAULT_PREFETCH_FACTOR if not spec.prefetch else max(1, -(-(spec.prefetch - 1) // workers))
    return {
        "batch_size": None,
        "num_workers": workers,
        "pin_memory": True,
        "prefetch_factor": ahead,
        "persistent_workers": True,
    }


class DataLoaderAccelerator(Accelerator):
    """An accelerator whose batches come from a DataLoader: one thread, the training loop's."""

    def __init__(self, index: int, spec: TrainSpec, data: TrainData, gpu: int | None, compute: Any, limit: int | None,
                 bind: Callable[[], None] = lambda: None):  # fmt: skip
        super().__init__(index, spec, data, gpu, [], compute, [], limit, bind)
        self._iterator: Any = None

    def start(self, clock0: float, stop: threading.Event, duration: float | None) -> None:
        self._clock0, self._stop, self._duration = clock0, stop, duration
        socket_dir_within_reach()  # before the loader's workers are forked: they inherit it
        i = self.record.index
        t = threading.Thread(target=self._steps, name=f"xferscope-acc{i}-loader", daemon=True)
        self._threads.append(t)
        t.start()

    def _next_batch(self, number: int) -> tuple[int, int, Callable[[], None]] | None:
        import torch
        from torch.utils.data import DataLoader

        if self._halted():
            return None
        if self._iterator is None:  # the workers start with the clock, as at a loop's first next()
            dataset = cast("Dataset[Any]", BatchDataset(self.data, self.plan))  # a map-style dataset, by its methods
            loader = DataLoader(dataset, sampler=Batches(self.limit), **loader_settings(self.spec))
            self._iterator = iter(loader)
        batch = next(self._iterator)
        gpu = self.record.gpu
        if gpu is not None:
            batch = batch.cuda(gpu, non_blocking=True)
            torch.cuda.current_stream(gpu).synchronize()
        samples = self.plan.batch(number)
        nbytes = sum(self.data.samples[i].length for i in samples)
        with self._cond:
            self.record.bytes_read += nbytes
        return len(samples), nbytes, lambda: None

    def close(self) -> None:
        """The loader's workers shut down (its iterator's own shutdown, also after a failure or a stop)."""
        it, self._iterator = self._iterator, None
        if it is not None:
            shutdown = getattr(it, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()


#: the longest path an AF_UNIX socket's address takes (``sun_path``'s 108 bytes, less the closing NUL)
SOCKET_PATH_MAX = 107
#: what multiprocessing adds to its directory's parent in a socket's path
SOCKET_PATH_ADDED = len("/pymp-12345678/listener-12345678")
#: where multiprocessing's directory goes when $TMPDIR is too long for it (the first writable)
SHORT_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def socket_dir_within_reach() -> str:
    """multiprocessing's directory for this process's sockets, made where a socket's path fits.

    A DataLoader's worker hands each batch's memory to the training loop through a socket in it (torch's
    ``file_descriptor`` sharing). Under a $TMPDIR too long for a socket's address, the worker's hand-over fails
    in a thread of its own and the loop waits for that batch for ever. Python 3.14's multiprocessing falls back
    to a short directory itself; this does the same on earlier ones. The directory is multiprocessing's own,
    removed when the process ends."""
    saved = tempfile.tempdir
    if len(tempfile.gettempdir()) + SOCKET_PATH_ADDED > SOCKET_PATH_MAX:
        tempfile.tempdir = next((d for d in SHORT_TEMP_DIRS if os.access(d, os.W_OK | os.X_OK)), saved)
    try:
        return str(multiprocessing.util.get_temp_dir())
    finally:
        tempfile.tempdir = saved


def evict(data: TrainData) -> float | None:
    """The data set's pages evicted (a DataLoader reads through the page cache); the share still resident."""

    return page_cache.evict_files([f.path for f in data.files])
