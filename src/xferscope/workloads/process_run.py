"""The parent's side of a workload's engine process (``process_host``): set-up, start, ticks, Ctrl-C, the end.

``WorkloadChild(target, what).execute(job, on_tick)`` returns an ``Outcome``: status ok, interrupted (Ctrl-C,
or ``stop()`` from another thread) or failed (the run's error, or the process died: its last words kept),
the run's payload (None where it never ended), the process's CPU seconds and peak RSS, labels, environment.
A set-up error is raised as the error it was.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xferscope import janitor
from xferscope.child_messages import (
    Close,
    Closed,
    Ended,
    Failed,
    ProcessFigures,
    Ready,
    Start,
    Stop,
    Tick,
    expect,
    unexpected,
)
from xferscope.errors import RunFailed
from xferscope.isolation import Channel, Child, describe_exit, error_from_wire

#: how long a stopped run gets to end what is in flight before its process is killed
STOP_GRACE_S = 20.0
#: how often a run that sends nothing is looked at (a stopped one may have run out of its grace)
QUIET_S = 0.5
#: what ``_recv`` gives when no message came in time
_QUIET = object()


@dataclass
class Outcome:
    status: str = "ok"
    error: str | None = None
    payload: Any = None
    process: ProcessFigures = field(default_factory=ProcessFigures)
    labels: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)


class WorkloadChild:
    def __init__(self, target: Callable[[Channel], Any], what: str, path: str):
        self.target, self.what, self.path = target, what, path
        self._child: Child | None = None
        self._stop_asked = False
        #: when stop was first asked (stop(), or Ctrl-C here): the grace runs from then
        self._stop_at: float | None = None
        #: the cuFile log of the child (cufile: a file of ours, guarded by the janitor until removed)
        self._log: str | None = None

    def stop(self) -> None:
        self._stop_asked = True
        if self._stop_at is None:
            self._stop_at = time.monotonic()
        child = self._child
        if child is not None:
            child.send(Stop())

    def _spawn(self) -> Child:
        env = None
        if self.path == "cufile":
            from xferscope.engines import cufile_driver

            extra, self._log = cufile_driver.log_for_child()
            if self._log:  # removed when the child has ended, and by the janitor should this process end first
                janitor.guard(self._log)
            env = {**os.environ, **extra} if extra else None
        return Child(self.target, what=self.what, env=env)

    def execute(self, job: Any, on_tick: Callable[[Any], None] | None = None) -> Outcome:
        child = self._child = self._spawn()
        if self._stop_asked:
            child.send(Stop())
        try:
            return self._drive(child, job, on_tick)
        finally:
            child.end(grace_s=10.0)
            self._remove_log()

    def _remove_log(self) -> None:
        log, self._log = self._log, None
        if log:
            with contextlib.suppress(OSError):
                os.unlink(log)
            janitor.release(log)

    @staticmethod
    def _recv(child: Child, timeout: float | None = None):
        """The child's next message; None once it has gone; ``_QUIET`` when none came within ``timeout``."""
        try:
            return child.recv(timeout)
        except TimeoutError:
            return _QUIET
        except (EOFError, OSError):
            return None

    def _drive(self, child: Child, job: Any, on_tick) -> Outcome:
        child.send(job)
        try:
            message = self._recv(child)
        except KeyboardInterrupt:
            child.send(Close())
            raise
        if message is None:
            raise self._died(child, "while setting up")
        try:
            ready = expect(message, Ready, Failed)
            if isinstance(ready, Failed):
                raise error_from_wire(ready.error)
        except Exception:
            child.send(Close())
            raise
        out = Outcome(labels=list(ready.labels), environment=dict(ready.environment))
        child.send(Start())
        killed = False
        while True:
            try:
                message = self._recv(child, QUIET_S)
            except KeyboardInterrupt:
                out.status = "interrupted"
                self.stop()
                continue
            if message is None and killed:  # it ignored the stop: what it sent until then is kept
                out.status = "interrupted"
                out.error = (
                    f"{self.what} did not stop within {STOP_GRACE_S:g} s of the stop request; its process was "
                    "killed; the figures measured until then are kept"
                )
                break
            if message is None:
                died = self._died(child, "while running")
                out.status, out.error = "failed", str(died)
                out.environment["engine_last_words"] = died.detail
                break
            if message is _QUIET:
                pass
            elif isinstance(message, Tick):
                if on_tick is not None:
                    on_tick(message.progress)
            elif isinstance(message, Ended):
                out.payload, out.process = message.payload, message.process
                if message.error is not None:
                    out.status, out.error = "failed", str(error_from_wire(message.error))
                elif self._stop_asked:
                    out.status = "interrupted"
                break
            else:  # a message a running workload does not send: the run cannot be read any further
                out.status, out.error = "failed", str(unexpected(message, Tick, Ended))
                self.stop()
                break
            if not killed and self._stop_at is not None and time.monotonic() - self._stop_at > STOP_GRACE_S:
                child.kill()
                killed = True
        child.send(Close())
        deadline = time.monotonic() + STOP_GRACE_S  # then execute() ends it, as it would a process that left
        while (message := self._recv(child, QUIET_S)) is not None and not isinstance(message, Closed):
            if time.monotonic() > deadline:
                break
        return out

    def _died(self, child: Child, when: str) -> Died:
        rc = child.wait(10.0)
        if rc is None:
            child.kill()
            rc = child.wait()
        how, _ = describe_exit(rc)
        return Died(f"{self.what}'s process died {when} ({how})", child.stderr_tail())


class Died(RunFailed):
    def __init__(self, message: str, detail: list[str]):
        self.detail = detail
        super().__init__(message + (f": {detail[-1]}" if detail else ""))
