"""The console's runs, without any Textual: records, bounded sample buffers, and the batch loop.

The batch loop runs in a worker thread. It hands samples over through a
``SampleBuffer`` (an append from the sampler thread, never a wait) and reports
state changes through ``BatchEvents``; the console turns those into messages
and redraws at its own rate from the buffers.
"""

from __future__ import annotations

import itertools
import math
import resource
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from xferscope.compare.rounds import PlannedRun, RoundsComparison
from xferscope.engines.base import RunResult, Sample
from xferscope.errors import XferscopeError
from xferscope.run.dataset import SharedDataset
from xferscope.run.engine_pool import kept_engines
from xferscope.run.runner import EngineRun
from xferscope.spec import RunSpec
from xferscope.target import Interrupted

#: samples kept per run for the charts (10 minutes at the default 10 Hz); the run keeps all of them
HISTORY_POINTS = 6000
#: the window that "now" figures average over: steadier than one 0.1 s interval, still current
WINDOW_S = 1.0
#: samples waiting for the next redraw; more than this means the console has stalled: drop the oldest
BUFFER_POINTS = 2048
#: runs whose time series (and latency histogram) the console keeps; older runs of the session keep their
#: summary figures, so that a console left open for hours of runs stays small
SERIES_KEPT = 50


class SampleBuffer:
    """Samples from the engine's process, taken by the console at its own rate. Bounded; never blocks."""

    def __init__(self, maxlen: int = BUFFER_POINTS):
        self._q: deque[tuple[float, Sample]] = deque(maxlen=maxlen)

    def push(self, sample: Sample | None) -> None:
        """Keep ``sample`` with the monotonic time it was taken (the end of its CPU interval)."""
        if sample is not None:
            self._q.append((time.monotonic(), sample))

    def drain(self) -> list[tuple[float, Sample]]:
        out = []
        while True:
            try:
                out.append(self._q.popleft())
            except IndexError:
                return out


_LET_GO_BUFFER = SampleBuffer(maxlen=0)


@dataclass
class RunRecord:
    """One run as the console shows it. Changed only on the console's thread."""

    run_id: int
    spec: RunSpec
    batch_index: int = 0
    batch_size: int = 1
    point: int = 0  # the grid point this run measures (0-based), for a profile's grid
    repetition: int = 0  # which repetition of its point (0-based)
    repetitions: int = 1
    state: str = "queued"  # queued, preparing, running, finished, stopped, failed, skipped
    buffer: SampleBuffer = field(default_factory=SampleBuffer)
    history: deque = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    taken_at: deque = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))  # monotonic, per history
    result: RunResult | None = None
    error: str | None = None
    error_detail: list[str] = field(default_factory=list)  # a dead engine process's last words
    labels: list[str] = field(default_factory=list)
    prepared_bytes: tuple[int, int] = (0, 0)
    console_cpu_s: float = 0.0  # the console's own CPU time while this run was timed
    console_usr_s: float = 0.0
    console_sys_s: float = 0.0
    compacted: bool = False  # its time series were let go (see ``compact``); its summary stays
    _console_mark: tuple[float, float] | None = None
    planned: PlannedRun | None = None  # the run of a comparison in rounds this record is

    @property
    def latest(self) -> Sample | None:
        return self.history[-1] if self.history else None

    @property
    def active(self) -> bool:
        return self.state in ("queued", "preparing", "running")

    @property
    def title(self) -> str:
        if self.planned is not None:
            return (
                f"{self.spec.name} ({self.batch_index + 1}/{self.batch_size}) "
                f"round {self.planned.round + 1}/{self.repetitions}"
            )
        where = f" ({self.batch_index + 1}/{self.batch_size})" if self.batch_size > 1 else ""
        rep = f" rep {self.repetition + 1}/{self.repetitions}" if self.repetitions > 1 else ""
        return f"{self.spec.name}{where}{rep}"

    def recent(self, seconds: float = WINDOW_S) -> list[Sample]:
        """The samples of the last ``seconds`` (at least the latest one): what "now" figures average."""
        out = []
        if self.history:
            end = self.history[-1].t
            for sample in reversed(self.history):
                if out and sample.t <= end - seconds:
                    break
                out.append(sample)
        return out[::-1]

    def take_samples(self) -> list[Sample]:
        stamped = self.buffer.drain()
        samples = [s for _, s in stamped]
        self.history.extend(samples)
        self.taken_at.extend(t for t, _ in stamped)
        return samples

    def recent_window(self, seconds: float = WINDOW_S) -> tuple[float, float] | None:
        """(start, end) in monotonic time of the intervals ``recent()`` averages: the window of the
        process figures, which the sampler read when it took each sample."""
        recent = self.recent(seconds)
        if not recent or len(self.taken_at) != len(self.history):
            return None
        end = self.taken_at[-1]
        return end - sum(s.dt for s in recent), end

    def mark_console(self, usr_sys_s: tuple[float, float]) -> None:
        self._console_mark = usr_sys_s

    def settle_console(self, usr_sys_s: tuple[float, float]) -> None:
        if self._console_mark is not None:
            usr, sys_ = usr_sys_s[0] - self._console_mark[0], usr_sys_s[1] - self._console_mark[1]
            self.console_usr_s += usr
            self.console_sys_s += sys_
            self.console_cpu_s += usr + sys_
            self._console_mark = None


#: what a let-go run holds instead of its own buffers: empty, and dropping anything put in them
_LET_GO_HISTORY: deque = deque(maxlen=0)


def compact(records: list[RunRecord], keep: int = SERIES_KEPT) -> int:
    """Let go of the time series, latency histograms and per-core figures of the ended runs older than the
    newest ``keep``; their summaries (throughput, IOPS, latency percentiles, CPU) stay, with their strings
    shared. Returns how many were let go now."""
    ended = [r for r in records if not r.active]
    n = 0
    for record in ended[:-keep] if keep else ended:
        if record.compacted:
            continue
        record.history = record.taken_at = _LET_GO_HISTORY
        record.buffer = _LET_GO_BUFFER
        result = record.result
        if result is not None:
            result.samples = []
            result.histogram = None
            result.cpu = {sys.intern(k): v for k, v in result.cpu.items() if k != "per_core_pct"}
            result.environment = {
                sys.intern(k): sys.intern(v) if isinstance(v, str) else v for k, v in result.environment.items()
            }
            result.labels = [sys.intern(label) for label in result.labels]
            if result.spec == record.spec:  # the copy that came back from the engine's process
                result.spec = record.spec
        record.compacted = True
        n += 1
    return n


_ids = itertools.count(1)


def new_records(specs: list[RunSpec], repetitions: int = 1) -> list[RunRecord]:
    """One record per run: each spec ``repetitions`` times in a row (a grid point's repetitions together)."""
    return [
        RunRecord(next(_ids), spec, i, len(specs), point=i, repetition=rep, repetitions=repetitions)
        for i, spec in enumerate(specs)
        for rep in range(repetitions)
    ]


def comparison_records(comp: RoundsComparison, first: int = 0) -> list[RunRecord]:
    """One record per run of a comparison from run ``first`` on, in the order the rounds run them."""
    n = len(comp.runs)
    return [
        RunRecord(
            next(_ids), run.spec, i, n, point=run.slot, repetition=run.round, repetitions=comp.rounds, planned=run
        )
        for i, run in enumerate(comp.runs)
        if i >= first
    ]


class BatchEvents(Protocol):
    """What the batch loop reports; called from its thread, so implementations only post messages."""

    def preparing(self, record: RunRecord) -> None: ...
    def progress(self, record: RunRecord, done: int, total: int) -> None: ...
    def started(self, record: RunRecord, labels: list[str]) -> None: ...
    def finished(self, record: RunRecord, result: RunResult) -> None: ...
    def failed(self, record: RunRecord, reason: str, result: RunResult | None, detail: list[str] | None = None) -> None:
        """``detail``: what else explains it (the last lines of a dead engine process, cuFile's log)."""

    def stopped(self, record: RunRecord) -> None: ...
    def done(self, records: list[RunRecord]) -> None: ...
    def round_added(self, records: list[RunRecord], why: str) -> None: ...


class Batch:
    """Runs records one after another in the calling thread. ``stop()`` may be called from any thread.

    With a ``comparison``, the records are its runs: one dataset is prepared for all of them before the
    first (reported as the first record's preparation) and removed after the last, and its files' pages are
    evicted from the page cache before each run (the comparison notes whether they left)."""

    def __init__(self, records: list[RunRecord], events: BatchEvents, comparison: RoundsComparison | None = None):
        self.records = records
        self.events = events
        self.comparison = comparison
        self.dataset: SharedDataset | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._run: EngineRun | None = None
        self._finished = threading.Event()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Stop the run in progress (what it measured is kept) and skip the rest."""
        self._stop.set()
        with self._lock:
            run = self._run
        if run is not None:
            run.stop()

    def run(self) -> None:
        try:
            if self.comparison is not None and not self._prepare_dataset():
                return
            with kept_engines():  # the batch's runs of each path share one engine process
                i = 0
                while i < len(self.records):  # a comparison with --rounds auto may add records as it goes
                    record = self.records[i]
                    i += 1
                    if self._stop.is_set():
                        self.events.stopped(record)
                        continue
                    self._one(record)
                    self._add_round_if_undecided()
        finally:
            with self._lock:
                self._run = None
            if self.dataset is not None:
                self.dataset.close()
            self._finished.set()
            self.events.done(self.records)

    def _prepare_dataset(self) -> bool:
        """The comparison's files, once for every run; False (every record told why) when that fails."""
        first = self.records[0]
        self.dataset = SharedDataset(self.comparison.specs[0])
        self.events.preparing(first)
        try:
            self.dataset.prepare(self._stop, _throttled(lambda d, t: self.events.progress(first, d, t)))
        except Interrupted:
            for record in self.records:
                self.events.stopped(record)
            return False
        except XferscopeError as exc:
            for record in self.records:
                self.events.failed(record, str(exc), None)
            return False
        return True

    def _add_round_if_undecided(self) -> None:
        comp = self.comparison
        if comp is None or self._stop.is_set():
            return
        before = len(comp.runs)
        why = comp.add_round_if_undecided()
        if why:
            added = comparison_records(comp, before)
            self.records.extend(added)
            self.events.round_added(added, why)

    def _drop_cache(self) -> None:
        if self.comparison is not None:
            self.comparison.before_run(True, self.dataset.files if self.dataset is not None else ())

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the loop to end (runs closed, scratch files removed); True when it has."""
        return self._finished.wait(timeout)

    def _one(self, record: RunRecord) -> None:
        spec = self.dataset.spec_for(record.spec) if self.dataset is not None else record.spec
        self._drop_cache()
        try:
            run = EngineRun(spec)
        except XferscopeError as exc:
            self.events.failed(record, str(exc), None)
            return
        run.subscribe(record.buffer.push)
        with self._lock:
            self._run = run
        if self._stop.is_set():  # stop() came before the run was registered
            run.stop()
        self.events.preparing(record)
        try:
            run.prepare(progress=_throttled(lambda d, t: self.events.progress(record, d, t)))
            if self._stop.is_set():
                raise Interrupted("stopped before the run started")
            run.start()
        except Interrupted:
            run.close()
            self.events.stopped(record)
            return
        except XferscopeError as exc:  # also an engine process that died while preparing (EngineDied)
            run.close()
            self.events.failed(record, str(exc), None, list(getattr(exc, "detail", None) or []))
            return
        except Exception as exc:  # an engine bug must not take the console down
            run.close()
            self.events.failed(record, f"{record.spec.path}: unexpected error: {exc!r}", None)
            return
        self.events.started(record, list(run.labels))
        while not run.join(0.25):
            pass
        run.close()
        if record.planned is not None and self.dataset is not None:
            record.planned.files = self.dataset.identity()
        try:
            result = run.finish()
        except XferscopeError as exc:
            self.events.failed(record, str(exc), None, list(getattr(exc, "detail", None) or []))
            return
        if record.planned is not None:  # here as well as in the console's thread: the next round is decided here
            record.planned.result = result
        if result.status == "failed":
            self.events.failed(record, f"{record.spec.path}: {result.error}", result, list(result.error_detail))
        else:
            self.events.finished(record, result)


def _throttled(progress, every_s: float = 0.2):
    """Scratch-file fill progress, at most five reports a second, and always the last one."""
    last = [0.0]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - last[0] >= every_s:
            last[0] = now
            progress(done, total)

    return report


class ConsoleCpu:
    """CPU time of the console's process: its event loop, the thread that drives the runs and reads the
    engine's messages, Textual's writer. The engines run in processes of their own, apart from it."""

    @staticmethod
    def times() -> tuple[float, float]:
        """(user, system) CPU seconds the console's process has used so far (children excluded)."""
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime, ru.ru_stime


class CpuLog:
    """Readings of the console's CPU time, taken at every redraw tick, to tell its use over any recent
    window (the one the engine process's figure covers). Bounded; the console's thread only."""

    def __init__(self, meter: ConsoleCpu, keep: int = 64):
        self.meter = meter
        self.readings: deque[tuple[float, float, float]] = deque(maxlen=keep)

    def take(self, now: float | None = None) -> None:
        usr, sys_ = self.meter.times()
        self.readings.append((time.monotonic() if now is None else now, usr, sys_))

    def at(self, t: float) -> tuple[float, float] | None:
        """(user, system) CPU seconds at monotonic time ``t``, interpolated between readings; None
        outside the readings kept."""
        r = self.readings
        if not r or t < r[0][0] or t > r[-1][0]:
            return None
        for (t0, u0, s0), (t1, u1, s1) in zip(r, list(r)[1:]):
            if t0 <= t <= t1:
                f = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
                return u0 + f * (u1 - u0), s0 + f * (s1 - s0)
        return r[-1][1], r[-1][2]

    def pct_between(self, start: float, end: float) -> tuple[float, float] | None:
        """(user %, system %) of one core between two monotonic times; None where not covered."""
        a, b = self.at(start), self.at(end)
        if a is None or b is None or end <= start:
            return None
        wall = end - start
        return 100.0 * (b[0] - a[0]) / wall, 100.0 * (b[1] - a[1]) / wall


def window_average(samples: list[Sample], field: str) -> float:
    """A percentage over several intervals, each weighted by its length (intervals without it left out)."""
    pairs = [(getattr(s, field), s.dt) for s in samples if math.isfinite(getattr(s, field))]
    total = sum(dt for _, dt in pairs)
    return sum(v * dt for v, dt in pairs) / total if total > 0 else math.nan


def window_rate(samples: list[Sample], field: str) -> float:
    """``bytes`` or ``ops`` per second over several intervals."""
    total = sum(s.dt for s in samples)
    return sum(getattr(s, field) for s in samples) / total if total > 0 else math.nan
