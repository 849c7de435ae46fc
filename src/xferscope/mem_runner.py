"""A memory sweep with its engine in a process of its own: a crash there is a failed sweep here.

``MemRun(spec)`` is what ``xferscope mem``, the console's Memory view and sweeps use.
It offers what ``xferscope.engines.mem.MemSweep`` offers (iterate it, or ``async for``;
``run``, ``cancel``, ``result``, ``expected_points``), while the sweep itself, and the
native core ``_memcore`` it drives, run in a child started through
``xferscope.isolation`` (``xferscope.mem_runner:serve``), as the I/O engines do
(``xferscope.runner``). When that process dies by a signal or leaves early, the
sweep raises ``EngineDied`` ("mem: the engine process died by SIGSEGV
(segmentation fault) after 3 of 12 points, 4.2 s into the sweep"), ``result`` keeps
the points measured until then, with ``error`` set, and the next ``MemRun`` starts a
new process.

What passes over the channel (parent -> child on the left; ``child_messages`` and the two below):

    MemSpec                     SweepReady(the spec validated, expected points) or Failed
    Start                       PointMeasured(MemPoint, environment)… as each is measured
    Stop (any time)             Ended(MemResult, error=None, or the sweep's error)

then the child leaves. A memory sweep creates no files: when the parent is gone
(the channel reads end-of-file), the child simply leaves, and the kernel frees its
buffers and ends its threads.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from xferscope.child_messages import Ended, Failed, Start, Stop, expect, heard
from xferscope.engines.mem import MemPoint, MemResult, MemSpec, MemSweep, PointStream, finish_result
from xferscope.isolation import Channel, Child, describe_exit, error_from_wire, error_to_wire
from xferscope.runner import TAIL_LINES, EngineDied


class SweepReady(msgspec.Struct, frozen=True):
    """The sweep is set up: its spec as validated there, and how many points it will measure."""

    spec: MemSpec
    expected: int


class PointMeasured(msgspec.Struct, frozen=True):
    """One point, and the sweep's environment as it stands."""

    point: MemPoint
    environment: dict[str, Any]


#: after a cancel, how long the engine's process gets to hand over what it measured before it is killed
CANCEL_GRACE_S = 15.0


class MemRun(PointStream):
    """One memory sweep, its engine in a child process. Iterate it once (``for p in run`` or ``async for``);
    ``result`` holds the points as they come, and everything else once it ends."""

    def __init__(self, spec: MemSpec):
        child = self._child = Child(serve, what="mem engine", thread_death_signal=False)
        self._phase = "setting up"
        self._started_at: float | None = None
        self._cancel = threading.Event()
        self._ended = threading.Event()
        self._used = False
        child.send(spec)
        try:
            message = child.recv()
        except (EOFError, OSError):
            raise self._death() from None
        try:
            ready = expect(message, SweepReady, Failed)
            if isinstance(ready, Failed):
                raise error_from_wire(ready.error)
        except Exception:
            child.end(grace_s=5.0)
            raise
        self.spec, self._expected = ready.spec, ready.expected
        self.result = MemResult(backend=self.spec.backend, spec=self.spec)

    @property
    def pid(self) -> int:
        return self._child.pid

    def expected_points(self) -> int:
        """How many points the sweep will measure (as the engine counts them)."""
        return self._expected

    # -- control

    def cancel(self) -> None:
        """Stop within about a second; the points measured stay in ``result``, marked cancelled."""
        self._cancel.set()
        self._child.send(Stop())

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    # -- the engine's process

    def _start(self, post: Callable[[tuple[str, Any]], None]) -> threading.Thread:
        if self._used:
            raise RuntimeError("a MemRun runs once; make a new one")
        self._used = True
        self._started_at = time.monotonic()
        self._phase = "sweeping"
        if not self._child.send(Start()):
            self._phase = "starting"
        reader = threading.Thread(target=self._read, args=(post,), name=f"xferscope-mem-{self.pid}", daemon=True)
        reader.start()
        return reader

    def _read(self, post: Callable[[tuple[str, Any]], None]) -> None:
        """The reader thread: points until the sweep's end, or the process's death."""
        child = self._child
        try:
            while True:
                message = expect(child.recv(), PointMeasured, Ended)
                if isinstance(message, PointMeasured):
                    self.result.environment.update(message.environment)
                    self.result.points.append(message.point)
                    post(("point", message.point))
                else:
                    self._adopt(message.payload)
                    error = error_from_wire(message.error) if message.error is not None else None
                    if error is not None:
                        self.result.error = str(error)
                    self._ended.set()
                    child.end(grace_s=5.0)
                    post(("error", error) if error is not None else ("done", None))
                    return
        except (EOFError, OSError):
            pass
        except Exception as exc:  # a message that cannot be read: the channel is useless from here on
            print(f"xferscope: cannot read the memory engine's messages: {exc!r}", file=sys.stderr)
            child.kill()
        death = self._death()
        finish_result(self.result, cancelled=self._cancel.is_set())
        self.result.error = str(death).split(": ", 1)[1]
        death.result = self.result
        self._ended.set()
        post(("error", death))

    def _adopt(self, final: MemResult) -> None:
        """The engine's own result: its points are those already here (sent one by one); take the rest,
        keeping this result and its environment dict (consumers hold them)."""
        environment = self.result.environment
        environment.update(final.environment)
        for name in final.__dataclass_fields__:
            if name not in ("points", "environment"):
                setattr(self.result, name, getattr(final, name))
        self.result.points[:] = final.points
        self.result.environment = environment

    def _death(self) -> EngineDied:
        """What happened to the process that ended without its answer (waited for, killed if it lingers)."""
        child = self._child
        rc = child.wait(10.0)
        if rc is None:  # closed its end yet still alive: end it
            child.kill()
            rc = child.wait()
        child.end(grace_s=0.0)
        how, name = describe_exit(rc)
        if self._started_at is None:
            when = f"while {self._phase}"
        else:
            when = (
                f"after {len(self.result.points)} of {self._expected} points, "
                f"{time.monotonic() - self._started_at:.1f} s into the sweep"
            )
        tail = child.stderr_tail(TAIL_LINES)
        detail = ["engine process stderr (last lines):"] + ["  " + ln for ln in tail] if tail else []
        return EngineDied("mem", how, name, when, detail)

    def _wind_down(self, reader: threading.Thread) -> None:
        """The consumer stopped listening: stop the sweep if it still runs, wait for what it measured, and
        see that the process is gone."""
        if not self._ended.is_set():
            self.cancel()
            if not self._ended.wait(CANCEL_GRACE_S):
                self._child.kill()
        reader.join(CANCEL_GRACE_S)
        self._child.end(grace_s=5.0)


# ------------------------------------------------------------------ the engine's process


def serve(channel: Channel) -> None:
    """The child: set the sweep up, run it when told, send each point, then the result; leave when the
    parent is gone."""
    try:
        spec = channel.recv()
    except EOFError:
        return
    try:
        sweep = MemSweep(spec)
        expected = sweep.expected_points()
    except Exception as exc:  # every failure goes back to the caller
        _send(channel, Failed(error_to_wire(exc)))
        return
    _send(channel, SweepReady(sweep.spec, expected))
    started = threading.Event()

    def listen() -> None:
        while True:
            try:
                command = channel.recv()
            except (EOFError, OSError):  # the parent is gone (or done): nothing here outlives it
                _leave()
            command = heard(command, lambda answer: _send(channel, answer), Start, Stop)
            if isinstance(command, Start):
                started.set()
            elif isinstance(command, Stop):
                sweep.cancel()
                started.set()

    threading.Thread(target=listen, name="xferscope-mem-commands", daemon=True).start()
    started.wait()
    try:
        for point in sweep:
            _send(channel, PointMeasured(point, dict(sweep.result.environment)))
        _send(channel, Ended(sweep.result))
    except Exception as exc:  # the sweep's failure, with what it measured
        _send(channel, Ended(sweep.result, error=error_to_wire(exc)))
    _leave()


def _send(channel: Channel, message: Any) -> None:
    try:
        channel.send(message)
    except OSError:  # the parent is gone
        _leave()


def _leave() -> None:
    """Leave at once (no exit handlers: the native core's threads and buffers go with the process)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
