"""A memory sweep with its engine in a process of its own: a crash there is a failed sweep here.

``MemRun(spec)`` is what ``xferscope mem``, the console's Memory view and sweeps use.
It offers what ``xferscope.memory.sweep.MemSweepRun`` offers (iterate it, or ``async for``;
``run``, ``cancel``, ``result``, ``expected_points``), while the sweep itself, and the
native core ``_memcore`` it drives, run in a child (``serve``: the one child host of
``xferscope.child_host``), driven from here by ``xferscope.child_driver``, as the I/O
engines and the workloads are. When that process dies by a signal or leaves early, the
sweep raises ``EngineDied`` ("mem: the engine process died by SIGSEGV
(segmentation fault) after 3 of 12 points, 4.2 s into the sweep"), ``result`` keeps
the points measured until then, with ``error`` set, and the next ``MemRun`` starts a
new process.

What passes over the channel (parent -> child on the left; ``child_messages`` and the two below):

    MemSpec                     SweepReady(the spec validated, expected points) or Failed
    Start                       SweptMemPoint(MemPoint, environment)… as each is measured
    Stop (any time)             Ended(MemSweep, error=None, or the sweep's error)
    Close (any time)            Closed

A memory sweep creates no files: when the parent is gone (the channel reads end-of-file),
the child stops the sweep and leaves, and the kernel frees its buffers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from xferscope import child_host
from xferscope.child_driver import ChildDriver, EngineDied
from xferscope.child_messages import Start
from xferscope.isolation import Channel, error_from_wire
from xferscope.memory.result import new_sweep, with_figures
from xferscope.memory.sweep import MemSpec, MemSweepRun, PointStream, finish_result
from xferscope.records import MemEnvironment, MemPoint, MemSweep


class SweepReady(msgspec.Struct, frozen=True):
    """The sweep is set up: its spec as validated there, and how many points it will measure."""

    spec: MemSpec
    expected: int


class SweptMemPoint(msgspec.Struct, frozen=True):
    """One point, and the sweep's environment as it stands."""

    point: MemPoint
    environment: MemEnvironment


#: after a cancel, how long the engine's process gets to hand over what it measured before it is killed
CANCEL_GRACE_S = 15.0


class MemRun(PointStream):
    """One memory sweep, its engine in a child process. Iterate it once (``for p in run`` or ``async for``);
    ``result`` holds the points as they come, and everything else once it ends."""

    def __init__(self, spec: MemSpec):
        self._phase = "setting up"
        self._started_at: float | None = None
        self._used = False
        self._post: Callable[[tuple[str, Any]], None] | None = None
        self._told = False  # the consumer has had the sweep's end
        self._lock = threading.Lock()
        self._expected = 0
        d = self._driver = ChildDriver(
            "mem engine", progress=(SweptMemPoint,), on_progress=self._point, on_over=self._tell_end, died=self._died
        )
        try:
            d.launch(serve, thread_death_signal=False)
            d.send_job(spec)
            ready = d.answer(SweepReady)
        except BaseException:
            d.close(0, ask=False)
            raise
        self.spec, self._expected = ready.spec, ready.expected
        self.result = new_sweep(self.spec.backend, self.spec)

    @property
    def pid(self) -> int:
        return self._driver.pid

    def expected_points(self) -> int:
        """How many points the sweep will measure (as the engine counts them)."""
        return self._expected

    # -- control

    def cancel(self) -> None:
        """Stop within about a second; the points measured stay in ``result``, marked cancelled."""
        self._driver.stop()

    @property
    def cancelled(self) -> bool:
        return self._driver.stop_asked

    # -- the engine's process

    def _start(self, post: Callable[[tuple[str, Any]], None]) -> threading.Thread:
        if self._used:
            raise RuntimeError("a MemRun runs once; make a new one")
        self._used = True
        self._post = post
        self._started_at = time.monotonic()
        self._phase = "sweeping"
        if not self._driver.send(Start()):
            self._phase = "starting"
        if self._driver.over.is_set():  # it ended before there was anybody to tell
            self._tell_end()
        assert self._driver.reader is not None
        return self._driver.reader

    def _point(self, message: SweptMemPoint) -> None:
        self.result.environment.update(message.environment)
        self.result.points.append(message.point)
        if self._post is not None:
            self._post(("point", message.point))

    def _tell_end(self) -> None:
        """The sweep's end, once, to the consumer (none before the sweep has started: set-up raises instead)."""
        with self._lock:
            if self._post is None or self._told:
                return
            self._told = True
        ended = self._driver.ended
        if ended is not None:
            if ended.payload is not None:
                self._adopt(ended.payload)
            else:  # stopped before it started
                finish_result(self.result, cancelled=True)
            error = error_from_wire(ended.error) if ended.error is not None else None
            if error is not None:
                self.result.error = str(error)
                with_figures(self.result)
            self._post(("error", error) if error is not None else ("done", None))
            return
        death = self._driver.death
        assert isinstance(death, EngineDied)
        finish_result(self.result, cancelled=self.cancelled, error=str(death).split(": ", 1)[1])
        death.result = self.result
        self._post(("error", death))

    def _adopt(self, final: MemSweep) -> None:
        """The engine's own result: its points are those already here (sent one by one); take the rest,
        keeping this result and its environment dict (consumers hold them)."""
        environment = self.result.environment
        environment.update(final.environment)
        for name in final.__struct_fields__:
            if name not in ("points", "environment"):
                setattr(self.result, name, getattr(final, name))
        self.result.points[:] = final.points
        self.result.environment = environment

    def _died(self, how: str, signal_name: str | None) -> EngineDied:
        """What happened to the process that ended without its answer."""
        if self._started_at is None:
            when = f"while {self._phase}"
        else:
            points = len(self.result.points)
            when = (
                f"after {points} of {self._expected} points, {time.monotonic() - self._started_at:.1f} s into the sweep"
            )
        return EngineDied("mem", how, signal_name, when, self._driver.last_words())

    def _wind_down(self, reader: threading.Thread) -> None:
        """The consumer stopped listening: stop the sweep if it still runs, wait for what it measured, and
        see that the process is gone."""
        d = self._driver
        if not d.over.is_set():
            self.cancel()
            if not d.over.wait(CANCEL_GRACE_S):
                d.kill()
        d.close(CANCEL_GRACE_S)  # the host frees the sweep and leaves; the reader then reads the end of its channel
        reader.join(CANCEL_GRACE_S)


# ------------------------------------------------------------------ the engine's process


class SweepWork(child_host.Work):
    """The sweep as the child host's work (``child_host``): set up from its spec, each point sent as it is
    measured, the result at the end."""

    def __init__(self, spec: MemSpec):
        self.sweep = MemSweepRun(spec)
        self.expected = self.sweep.expected_points()

    def ready(self) -> SweepReady:
        return SweepReady(self.sweep.spec, self.expected)

    def interrupt(self) -> None:
        self.sweep.cancel()

    def run(self, stop: threading.Event, send: Callable[[Any], None]) -> child_host.WorkOutcome:
        sweep = self.sweep
        if stop.is_set():
            return child_host.WorkOutcome(None)
        try:
            for point in sweep:
                send(SweptMemPoint(point, sweep.result.environment.copy()))
            return child_host.WorkOutcome(sweep.result)
        except Exception as exc:  # the sweep's failure, with what it measured
            return child_host.WorkOutcome(sweep.result, exc)


def serve(channel: Channel) -> None:
    """The child: the sweep run by the one child host."""
    child_host.serve_with(channel, SweepWork)
