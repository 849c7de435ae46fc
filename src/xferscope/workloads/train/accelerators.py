"""The emulated accelerators: readers that fill batch buffers ahead, and a step loop that waits for the next
batch and computes on it. Runs in the engine's process (``train_process``); tests run it here with stand-ins.

Per accelerator: ``read_threads`` readers share ``slots`` batch buffers (``--prefetch``, the one being
computed on included). A reader takes a free buffer first and then the next batch number, so the batch the step
loop waits for always has a buffer and a reader. Batches follow DLIO's sharding: each epoch the samples are
shuffled with the seed (and the epoch), accelerator ``a`` of ``N`` takes every N-th from the a-th, and its
batches are consecutive runs of ``batch`` samples (the last, partial one dropped). Under MPI, ``a`` and ``N`` count
the accelerators of every rank (``TrainSpec.first_accelerator``, ``world_accelerators``).

A run ends after ``--steps`` steps per accelerator, ``--epochs`` epochs, or ``--duration`` seconds, whichever
comes first (``--epochs 1`` when none is given); ``stop`` ends it early, with every finished step kept.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from xferscope.errors import SpecError
from xferscope.workloads.common.au import Step
from xferscope.workloads.common.fetchers import Fetcher, Slot
from xferscope.workloads.common.generated import ALIGN
from xferscope.workloads.train.train_data import TrainData
from xferscope.workloads.train.train_spec import TrainSpec


def steps_per_epoch(spec: TrainSpec, data: TrainData) -> int:
    return len(data.samples) // spec.sharded_over // spec.batch


def check_enough(spec: TrainSpec, samples: int) -> None:
    """One batch per accelerator per epoch at least, or the run cannot take a step."""
    n = spec.sharded_over
    if samples // n // spec.batch < 1:
        raise SpecError(
            "files",
            f"the data set has {samples} samples; {n} accelerator{'s' * (n != 1)} "
            f"with batches of {spec.batch} need{'s' * (n == 1)} at least {n * spec.batch}: raise --files (or lower --batch, --accelerators)",
        )


def step_limit(spec: TrainSpec, data: TrainData) -> int | None:
    """Steps per accelerator, or None for a run bounded by its duration alone."""
    limits = []
    if spec.steps:
        limits.append(spec.steps)
    epochs = spec.epochs if spec.epochs else (None if (spec.steps or spec.duration) else 1)
    if epochs:
        limits.append(epochs * steps_per_epoch(spec, data))
    return min(limits) if limits else None


class BatchPlan:
    """Accelerator ``index``'s batches, epoch after epoch (each epoch's order planned when first asked for)."""

    def __init__(self, spec: TrainSpec, data: TrainData, index: int):
        self.spec, self.data, self.index = spec, data, index
        self.per_epoch = steps_per_epoch(spec, data)
        self._epochs: dict[int, list[list[int]]] = {}
        self._lock = threading.Lock()

    def batch(self, number: int) -> list[int]:
        epoch, within = divmod(number, self.per_epoch)
        with self._lock:
            plan = self._epochs.get(epoch)
            if plan is None:
                plan = self._epochs[epoch] = self._plan(epoch)
                self._epochs.pop(epoch - 2, None)
        return plan[within]

    def _plan(self, epoch: int) -> list[list[int]]:
        spec = self.spec
        order = list(range(len(self.data.samples)))
        random.Random(spec.seed * 1_000_003 + epoch).shuffle(order)
        mine = order[spec.first_accelerator + self.index :: spec.sharded_over]
        b = spec.batch
        return [mine[i * b : (i + 1) * b] for i in range(len(mine) // b)]


@dataclass
class AcceleratorProgress:
    index: int
    gpu: int | None
    steps: list[Step] = field(default_factory=list)
    bytes_read: int = 0
    cpu_s: float = 0.0  # the CPU time of its threads (readers and step loop), once they are done
    compute_after_first_s: float = 0.0  # the compute of every step but the first: AU's numerator, kept as it goes

    @property
    def au(self) -> float:
        """AU so far (DLIO's definition, as ``au.utilisation``), without going over the steps again."""
        steps = self.steps
        if len(steps) < 2:
            return float("nan")
        span = steps[-1].end_s - steps[0].end_s
        return self.compute_after_first_s / span if span > 0 else float("nan")

    error: BaseException | None = None


class Accelerator:
    def __init__(
        self,
        index: int,
        spec: TrainSpec,
        data: TrainData,
        gpu: int | None,
        fetchers: Sequence[Fetcher],
        compute: Any,
        slots: Sequence[Slot],
        limit: int | None,
        bind: Callable[[], None] = lambda: None,
    ):
        self.spec, self.data = spec, data
        self.record = AcceleratorProgress(index, gpu)
        self.plan = BatchPlan(spec, data, index)
        self.fetchers = list(fetchers)
        self.compute = compute
        self.limit = limit
        self.bind = bind  # makes this accelerator's GPU context current in the calling thread
        self._cond = threading.Condition()
        self._free = list(slots)
        self._ready: dict[int, tuple[Slot, int, int]] = {}
        self._next = 0
        self._done = False
        self._threads: list[threading.Thread] = []

    # ---------------------------------------------------------------- life
    def start(self, clock0: float, stop: threading.Event, duration: float | None) -> None:
        self._clock0, self._stop, self._duration = clock0, stop, duration
        i = self.record.index
        for r, fetcher in enumerate(self.fetchers):
            t = threading.Thread(target=self._reader, args=(fetcher,), name=f"xferscope-acc{i}-reader{r}", daemon=True)
            self._threads.append(t)
        self._threads.append(threading.Thread(target=self._steps, name=f"xferscope-acc{i}-steps", daemon=True))
        for t in self._threads:
            t.start()

    def join(self, timeout: float | None = None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if end is None else max(0.0, end - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def _halted(self) -> bool:
        return self._done or self._stop.is_set()

    def _fail(self, exc: BaseException) -> None:
        with self._cond:
            if self.record.error is None:
                self.record.error = exc
            self._done = True
            self._cond.notify_all()
        self._stop.set()  # one accelerator's failure ends the run

    # ---------------------------------------------------------------- readers
    def _reader(self, fetcher: Fetcher) -> None:
        cpu0 = time.thread_time()
        try:
            self._read_batches(fetcher)
        finally:
            self._add_cpu(time.thread_time() - cpu0)

    def _add_cpu(self, seconds: float) -> None:
        with self._cond:
            self.record.cpu_s += seconds

    def _read_batches(self, fetcher: Fetcher) -> None:
        try:
            self.bind()
            while True:
                with self._cond:
                    while not self._free and not self._halted():
                        self._cond.wait(0.1)
                    if self._halted() or (self.limit is not None and self._next >= self.limit):
                        return
                    slot = self._free.pop()
                    number = self._next
                    self._next += 1
                samples, nbytes = self._fill(fetcher, slot, number)
                if samples is None:
                    return
                with self._cond:
                    self._ready[number] = (slot, samples, nbytes)
                    self._cond.notify_all()
        except BaseException as exc:
            self._fail(exc)

    def _fill(self, fetcher: Fetcher, slot: Slot, number: int) -> tuple[int | None, int]:
        at = nbytes = 0
        batch = self.plan.batch(number)
        for sid in batch:
            if self._halted():
                fetcher.batch_done()
                return None, 0
            sample = self.data.samples[sid]
            fetcher.read(sample, slot, at)
            at += -(-fetcher.extent(sample)[1] // ALIGN) * ALIGN
            nbytes += sample.length
            with self._cond:
                self.record.bytes_read += sample.length
        fetcher.batch_done()
        return len(batch), nbytes

    # ---------------------------------------------------------------- the step loop
    def _steps(self) -> None:
        cpu0 = time.thread_time()
        try:
            self._take_steps()
        finally:
            self._add_cpu(time.thread_time() - cpu0)

    def _take_steps(self) -> None:
        try:
            self.bind()
            seconds = self.spec.computation_time
            number = 0
            while self.limit is None or number < self.limit:
                # the first batch is waited for from the run's start: the time to the first batch
                t0 = self._clock0 if number == 0 else time.perf_counter()
                got = self._next_batch(number)
                if got is None:
                    break
                samples, nbytes, done = got
                t1 = time.perf_counter()
                spent = self.compute.run(seconds)
                t2 = time.perf_counter()
                self.record.steps.append(Step(t1 - t0, spent, t2 - self._clock0, samples, nbytes))
                if number:  # after the append: a tick between the two reads AU a step short, never a step long
                    self.record.compute_after_first_s += spent
                done()
                number += 1
                if self._duration is not None and t2 - self._clock0 >= self._duration:
                    break
        except BaseException as exc:
            self._fail(exc)
        finally:
            with self._cond:
                self._done = True
                self._cond.notify_all()

    def _next_batch(self, number: int) -> tuple[int, int, Callable[[], None]] | None:
        """Batch ``number``, waited for until a reader has filled its buffer: its samples, its bytes, and what
        gives the buffer back once computed on; None where the run halted first."""
        with self._cond:
            while number not in self._ready and not self._halted():
                self._cond.wait(0.05)
            if self._halted():
                return None
            slot, samples, nbytes = self._ready.pop(number)

        def done() -> None:
            with self._cond:
                self._free.append(slot)
                self._cond.notify_all()

        return samples, nbytes, done


class AcceleratorTick(msgspec.Struct, frozen=True):
    """One accelerator in a tick: its steps and AU so far, the bytes it has read, and the steps taken since the
    last tick."""

    index: int
    steps: int
    au: float
    bytes_read: int
    new_steps: list[Step]


class TrainTick(msgspec.Struct, frozen=True):
    """What a live view shows of a training run ``t`` s in: each accelerator, and the bytes read by all."""

    t: float
    accelerators: list[AcceleratorTick]
    bytes_read: int


def progress(accelerators: Sequence[Accelerator], t: float, sent: dict[int, int]) -> TrainTick:
    """What a live view shows: per accelerator its steps, AU so far and bytes read, with the steps taken since
    the last tick (``sent``: how many of each accelerator's steps went out before)."""
    rows = []
    total = 0
    for a in accelerators:
        i = a.record.index
        new = a.record.steps[sent.get(i, 0) :]  # the step loop only appends: a slice is the steps since
        sent[i] = sent.get(i, 0) + len(new)
        rows.append(AcceleratorTick(i, sent[i], a.record.au, a.record.bytes_read, new))
        total += a.record.bytes_read
    return TrainTick(t, rows, total)


def run_accelerators(
    accelerators: Sequence[Accelerator],
    spec: TrainSpec,
    stop: threading.Event,
    on_tick: Callable[[TrainTick], None] | None = None,
) -> float:
    """Start every accelerator at once, tick every ``spec.interval`` until all are done; the seconds it took."""
    clock0 = time.perf_counter()
    sent: dict[int, int] = {}
    for a in accelerators:
        a.start(clock0, stop, spec.duration)
    while True:
        done = all(a.join(spec.interval / max(1, len(accelerators))) for a in accelerators)
        if on_tick is not None:
            on_tick(progress(accelerators, time.perf_counter() - clock0, sent))
        if done:
            break
    return time.perf_counter() - clock0
