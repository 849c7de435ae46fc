"""Run every point of a profile, repetition by repetition, saving after each one.

    sweep = SweepRun(profile, "results.json", listener=print)
    outcome = sweep.run()            # Ctrl-C: what was measured is saved, outcome.interrupted is set;
                                     # a results file that cannot be written stops it: outcome.not_written

Points already finished in the results file are skipped (resume); points that
cannot run here (no GPU, no cuFile, GPU index missing) are recorded as skipped with
the reason. The listener gets past-tense events, from the thread that runs the
sweep; it must not block (the console hands them to its own loop).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from xferscope import records
from xferscope.errors import EnvironmentProblem, NotWritten, SpecError, XferscopeError
from xferscope.profiles.model import Profile
from xferscope.run import engine_pool
from xferscope.run.scratch import SweepScratch
from xferscope.sweep.plan import Availability, PlannedPoint, plan_points
from xferscope.sweep.record import PointRecord, ResultsFile


# ------------------------------------------------------------------ events
@dataclass(frozen=True)
class RepetitionStarted:
    point: PlannedPoint
    repetition: int  # 1-based
    repetitions: int


@dataclass(frozen=True)
class SampleTaken:
    point: PlannedPoint
    sample: Any  # a runner Sample (io) or a MemPoint (mem)


@dataclass(frozen=True)
class RepetitionFinished:
    point: PlannedPoint
    record: PointRecord
    status: str  # ok, interrupted, failed


@dataclass(frozen=True)
class PointFinished:
    point: PlannedPoint
    record: PointRecord


@dataclass(frozen=True)
class PointSkipped:
    point: PlannedPoint
    reason: str
    already_done: bool = False  # finished in an earlier run of the same results file


@dataclass
class SweepOutcome:
    results: ResultsFile
    interrupted: bool = False
    not_written: NotWritten | None = None  # the results file could not be written: the sweep stopped
    ran: int = 0  # repetitions measured in this run
    skipped: list[PlannedPoint] = field(default_factory=list)
    failed: list[PlannedPoint] = field(default_factory=list)


class _Stopped(Exception):
    """The sweep was stopped (Ctrl-C or ``SweepRun.stop()``) during a repetition."""


# ------------------------------------------------------------------- sweep
class SweepRun:
    #: end the sweep at the first failed point (the points after it are left to a rerun)
    stop_on_failure = False

    def __init__(
        self,
        profile: Profile,
        results_path: str,
        *,
        listener: Callable[[Any], None] | None = None,
        availability: Availability | None = None,
    ):
        self.profile = profile
        self.points = plan_points(profile, availability)
        self.results = ResultsFile(results_path, profile, self.points)
        self.listener = listener or (lambda event: None)
        self._stop = threading.Event()
        self._current = None  # the EngineRun or MemRun in flight, for stop()

    def stop(self) -> None:
        """Stop after the repetition in flight ends (it ends within a second); keep what was measured."""
        self._stop.set()
        current = self._current
        if current is not None:
            (current.stop if hasattr(current, "stop") else current.cancel)()

    def run(self) -> SweepOutcome:
        outcome = SweepOutcome(self.results)
        scratch = SweepScratch()
        try:
            with engine_pool.kept_engines():  # a point's repetitions, and points of one path, share a process
                for point in self.points:
                    if self._stop.is_set():
                        outcome.interrupted = True
                        break
                    if outcome.failed and self.stop_on_failure:
                        break
                    self._run_point(point, outcome, scratch)
        except (_Stopped, KeyboardInterrupt):
            outcome.interrupted = True
        except NotWritten as exc:  # a full disk: stop measuring what could not be kept; the file holds the rest
            outcome.not_written = exc
        finally:
            self._current = None
            scratch.cleanup()
            if outcome.not_written is None:
                try:
                    with _interrupts_deferred():
                        self.results.save()
                except NotWritten as exc:
                    outcome.not_written = exc
        return outcome

    # ------------------------------------------------------------- a point
    def _run_point(self, point: PlannedPoint, outcome: SweepOutcome, scratch: SweepScratch) -> None:
        record = self.results.record(point)
        reps = self.profile.repetitions
        if record.ok_count() >= reps:  # measured earlier, here or on a machine that could
            record.status, record.reason = "done", None
            self.listener(PointSkipped(point, "finished earlier", already_done=True))
            return
        if point.skip:
            record.status, record.reason = "skipped", point.skip
            outcome.skipped.append(point)
            self.listener(PointSkipped(point, point.skip))
            return
        record.reason = None
        while record.ok_count() < reps:
            rep = record.ok_count() + 1
            self.listener(RepetitionStarted(point, rep, reps))
            try:
                status, data = self._measure(point, scratch)
            except (EnvironmentProblem, SpecError) as exc:  # cannot run here after all: say why, go on
                record.status, record.reason = ("partial" if record.ok_count() else "skipped"), str(exc)
                outcome.skipped.append(point)
                self._save()
                self.listener(PointSkipped(point, str(exc)))
                return
            record.repetitions.append(data)
            outcome.ran += 1
            if status == "ok":
                record.status = "done" if record.ok_count() >= reps else "partial"
            elif status == "interrupted":
                record.status = "partial" if record.ok_count() else "pending"
            else:
                record.status, record.reason = "failed", data.get("error") or "the run failed"
            if status != "ok" or record.ok_count() >= reps or self.results.cheap_to_save:
                self._save()
            self.listener(RepetitionFinished(point, record, status))
            if status == "interrupted" or self._stop.is_set():
                raise _Stopped
            if status == "failed":
                outcome.failed.append(point)
                return
        self.listener(PointFinished(point, record))

    def _save(self) -> None:
        with _interrupts_deferred():
            self.results.save()

    def _measure(self, point: PlannedPoint, scratch: SweepScratch) -> tuple[str, dict]:
        if self.profile.kind == "mem":
            return self._measure_mem(point)
        return self._measure_io(point, scratch)

    def _execute_io(self, point: PlannedPoint, scratch: SweepScratch, on_sample: Callable[[Any], Any]):
        """One repetition of an io point: its RunResult (a failure raises, as ``EngineRun.execute``)."""
        from xferscope.run.runner import EngineRun

        run = EngineRun(scratch.adapt(point.spec))
        self._current = run
        return run.execute(on_sample=on_sample)

    def _measure_io(self, point: PlannedPoint, scratch: SweepScratch) -> tuple[str, dict]:
        from xferscope.export import result_to_dict
        from xferscope.target import Interrupted

        on_sample = lambda s, *_: s is not None and self.listener(SampleTaken(point, s))  # noqa: E731
        try:
            result = self._execute_io(point, scratch, on_sample)
        except Interrupted:
            raise _Stopped from None
        except XferscopeError as exc:
            partial = getattr(exc, "result", None)
            if partial is None:
                if isinstance(exc, (EnvironmentProblem, SpecError)):
                    raise
                return "failed", {"status": "failed", "error": str(exc)}
            result = partial
        finally:
            if getattr(self._current, "stopped_by_user", False):
                # Ctrl-C as the repetition ended: it ran its course and is kept, and the sweep stops after it
                self._stop.set()
            self._current = None
        self.results.environment = dict(result.environment)
        return result.status, result_to_dict(result)

    def _measure_mem(self, point: PlannedPoint) -> tuple[str, dict]:
        from xferscope.memory.runner import MemRun

        sweep = MemRun(point.spec)
        self._current = sweep
        try:
            for mem_point in sweep:
                self.listener(SampleTaken(point, mem_point))
        except KeyboardInterrupt:
            sweep.cancel()
        except XferscopeError as exc:
            if isinstance(exc, (EnvironmentProblem, SpecError)):
                raise
            return "failed", {**records.as_data(sweep.result), "status": "failed", "error": str(exc)}
        finally:
            self._current = None
        result = sweep.result
        data = records.as_data(result)
        data["status"] = "interrupted" if result.cancelled else "ok"
        self.results.environment = dict(result.environment)
        return data["status"], data


@contextmanager
def _interrupts_deferred():
    """Hold Ctrl-C while the results file is written; deliver it afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    except ValueError:  # not in the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            raise KeyboardInterrupt
