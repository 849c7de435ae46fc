"""Counters for engines whose workers are Python threads (cufile-batch, cufile-async).

The same figures the native core keeps, in the same histogram buckets
(``xferscope.stats.bucket_index``), so their ``Snapshot``s look exactly like
native ones to the runner, the exporters and the console. One lock guards
everything: workers take it once per completion group, the sampler once per
snapshot.
"""

from __future__ import annotations

import threading
import time
from array import array

from xferscope.engines.base import Snapshot, WorkerCounters
from xferscope.stats import HIST_NBUCKETS, Histogram, bucket_index

_NO_MIN = (1 << 64) - 1


class Recorder:
    """Per-worker operation counts, bytes, latency sums and a read and a write histogram."""

    def __init__(self, workers: int):
        self.workers = workers
        self._lock = threading.Lock()
        self._ops = [[0, 0] for _ in range(workers)]
        self._bytes = [[0, 0] for _ in range(workers)]
        self._lat_sum = [[0, 0] for _ in range(workers)]
        self._hist = (array("Q", bytes(8 * HIST_NBUCKETS)), array("Q", bytes(8 * HIST_NBUCKETS)))
        self._lat_min = _NO_MIN
        self._lat_max = 0
        self._done: list[int | None] = [None] * workers
        self._first_done: tuple[int, int, int] | None = None
        self._error: tuple[str, int] | None = None
        self._t0: int | None = None
        self.all_done = threading.Event()

    # -- the timed region --------------------------------------------------------
    def begin(self) -> None:
        """The timed region starts now."""
        self._t0 = time.monotonic_ns()

    def elapsed_ns(self) -> int:
        return 0 if self._t0 is None else time.monotonic_ns() - self._t0

    # -- written by workers --------------------------------------------------------
    def record(self, worker: int, write: bool, nbytes: int, lat_ns: int, count: int = 1) -> None:
        """``count`` operations of ``nbytes`` each that took ``lat_ns`` each."""
        if count <= 0:
            return
        d = 1 if write else 0
        lat_ns = max(0, int(lat_ns))
        with self._lock:
            self._ops[worker][d] += count
            self._bytes[worker][d] += nbytes * count
            self._lat_sum[worker][d] += lat_ns * count
            self._hist[d][bucket_index(lat_ns)] += count
            if lat_ns < self._lat_min:
                self._lat_min = lat_ns
            if lat_ns > self._lat_max:
                self._lat_max = lat_ns

    def finish(self, worker: int) -> None:
        """Worker ``worker`` has stopped; the first to stop fixes elbencho's first-done point."""
        with self._lock:
            if self._done[worker] is not None:
                return
            t = self.elapsed_ns()
            self._done[worker] = t
            if self._first_done is None:
                self._first_done = (t, sum(map(sum, self._bytes)), sum(map(sum, self._ops)))
            if all(d is not None for d in self._done):
                self.all_done.set()

    def fail(self, message: str, offset: int = 0) -> None:
        """Keep the first failure; the run ends as failed with this message."""
        with self._lock:
            if self._error is None:
                self._error = (message, int(offset))

    @property
    def failed(self) -> bool:
        return self._error is not None

    # -- read by the sampler ---------------------------------------------------------
    def snapshot(self) -> Snapshot:
        with self._lock:
            workers = tuple(
                WorkerCounters(
                    self._ops[i][0],
                    self._ops[i][1],
                    self._bytes[i][0],
                    self._bytes[i][1],
                    self._lat_sum[i][0],
                    self._lat_sum[i][1],
                    self._done[i],
                )
                for i in range(self.workers)
            )
            hist_read = Histogram(array("Q", self._hist[0]))
            hist_write = Histogram(array("Q", self._hist[1]))
            return Snapshot(
                t_ns=self.elapsed_ns(),
                workers=workers,
                hist_read=hist_read,
                hist_write=hist_write,
                lat_min_ns=0 if self._lat_min == _NO_MIN else self._lat_min,
                lat_max_ns=self._lat_max,
                first_done=self._first_done,
                done=sum(d is not None for d in self._done),
                error=self._error,
            )
