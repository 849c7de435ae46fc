"""The parent's side of a workload's engine process (``process_host``): set-up, start, ticks, Ctrl-C, the end.

``WorkloadChild(target, what).execute(job, on_tick)`` returns an ``WorkloadOutcome``: status ok, interrupted (Ctrl-C,
``stop()`` from another thread, or a reason from outside: ``stop_when``) or failed (the run's error, or the
process died: its last words kept), the run's payload (None where it never ended), the process's CPU seconds and
peak RSS, labels, environment.
A set-up error is raised as the error it was.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from xferscope.child_driver import ChildDriver
from xferscope.child_messages import Ended, Go, Meet, ProcessFigures, Ready, Start, Tick, unexpected
from xferscope.errors import RunFailed
from xferscope.isolation import Channel, Child, error_from_wire
from xferscope.records import WorkloadEnvironment

#: how long a stopped run gets to end what is in flight before its process is killed
STOP_GRACE_S = 20.0
#: how often a run that sends nothing is looked at (a stopped one may have run out of its grace)
QUIET_S = 0.5


#: the processes of interrupted runs still closing (``close_interrupted_later``), each in a thread of its own
_closing: list[threading.Thread] = []
_defer_interrupted = False


#: what may stop a run from outside this process (``stop_when``)
_stop_source: Callable[[], str | None] | None = None


@contextlib.contextmanager
def stop_when(why: Callable[[], str | None]) -> Iterator[None]:
    """While inside, a running workload asks ``why()`` every ``QUIET_S``, from the thread that drives it (under MPI:
    whether another rank's run ended early), and stops at the first reason it gives: its status interrupted, the
    reason its error, what it measured kept."""
    global _stop_source
    before, _stop_source = _stop_source, why
    try:
        yield
    finally:
        _stop_source = before


def close_interrupted_later() -> None:
    """From now on, an interrupted run hands its outcome on at once and its process closes in the background
    (``join_closing`` waits for it): under MPI, Ctrl-C leaves the ranks only as long as the launcher gives them
    (Open MPI kills them a second later by default), and a process freeing GPU memory can take longer than that.
    A process whose parent is killed first closes by itself (``child_host``)."""
    global _defer_interrupted
    _defer_interrupted = True


def join_closing(timeout_s: float = STOP_GRACE_S + 15.0) -> None:
    """Wait for the processes of interrupted runs to close."""
    while _closing:
        _closing.pop().join(timeout_s)


@dataclass
class WorkloadOutcome:
    status: str = "ok"
    error: str | None = None
    payload: Any = None
    process: ProcessFigures = field(default_factory=ProcessFigures)
    labels: list[str] = field(default_factory=list)
    environment: WorkloadEnvironment = field(default_factory=lambda: WorkloadEnvironment())


class WorkloadChild:
    """One workload run in a process of its own (``execute`` once)."""

    def __init__(self, target: Callable[[Channel], Any], what: str, path: str):
        self.target, self.what, self.path = target, what, path
        self._on_tick: Callable[[Any], None] | None = None
        self._driver = ChildDriver(what, progress=(Tick,), on_progress=self._tick, died=self._died)
        self._phase = "while setting up"

    @property
    def _child(self) -> Child | None:
        return self._driver.child

    def stop(self) -> None:
        """End the run early, from any thread (before its process has its job, the job is followed by "stop")."""
        self._driver.stop()

    def _tick(self, message: Tick) -> None:
        if self._on_tick is not None:
            self._on_tick(message.progress)

    def execute(
        self,
        job: Any,
        on_tick: Callable[[Any], None] | None = None,
        on_ready: Callable[[], None] | None = None,
        on_meet: Callable[[str], bool] | None = None,
    ) -> WorkloadOutcome:
        """``on_ready``: called once the process is set up, before it starts (ranks of an MPI job meet there, so
        that their timed regions start together); what it raises ends the run before it starts. ``on_meet(what)``:
        the run waits at ``what`` mid-run (a checkpoint's start) until it returns: True goes on, False stops the
        run (another rank failed); without it, a run that meets goes on at once."""
        d, self._on_tick = self._driver, on_tick
        closing_s = 0.0  # a set-up that failed or was interrupted: asked to close, not waited for
        later = False
        try:
            from xferscope.engines import cufile_driver  # imported here: at the top it would slow every command's start

            env, log = cufile_driver.child_env(self.path)
            d.launch(self.target, env=env, log=log)
            out = self._drive(d, job, on_ready, on_meet)
            closing_s = STOP_GRACE_S
            later = _defer_interrupted and out.status == "interrupted"
            return out
        finally:
            if later:
                closer = threading.Thread(
                    target=d.close, args=(closing_s,), kwargs={"end_grace_s": 10.0}, name="xferscope-closing"
                )
                closer.start()
                _closing.append(closer)
            else:
                d.close(closing_s, end_grace_s=10.0)

    def _drive(
        self, d: ChildDriver, job: Any, on_ready: Callable[[], None] | None, on_meet: Callable[[str], bool] | None
    ) -> WorkloadOutcome:
        d.send_job(job)
        ready = d.answer(Ready)
        out = WorkloadOutcome(labels=list(ready.labels), environment=cast(WorkloadEnvironment, dict(ready.environment)))
        if on_ready is not None:
            on_ready()
        self._phase = "while running"
        d.send(Start())
        killed = False
        while True:
            try:
                if d.over.wait(QUIET_S):
                    break
                if _stop_source is not None and not d.stop_asked and (why := _stop_source()):
                    out.error = why
                    self.stop()
                other = d.next_answer(timeout=0)
            except KeyboardInterrupt:
                out.status = "interrupted"
                self.stop()
                continue
            except RunFailed:  # gone: the death is read below
                break
            if isinstance(other, Meet):
                try:
                    if on_meet is None or on_meet(other.what):
                        d.send(Go())
                    else:
                        self.stop()
                except KeyboardInterrupt:  # this rank stops; its next agreement tells the others
                    out.status = "interrupted"
                    self.stop()
                continue
            if other is not None:  # a message a running workload does not send: the run cannot be read further
                out.status, out.error = "failed", str(unexpected(other, Tick, Ended))
                self.stop()
                return out
            if not killed and d.stop_overdue(STOP_GRACE_S):
                d.kill()
                killed = True
        ended = d.ended
        if ended is not None:
            out.payload, out.process = ended.payload, ended.process
            if ended.error is not None:
                out.status, out.error = "failed", str(error_from_wire(ended.error))
            elif d.stop_asked:
                out.status = "interrupted"
        elif killed:  # it ignored the stop: what it sent until then is kept
            out.status = "interrupted"
            out.error = (
                f"{self.what} did not stop within {STOP_GRACE_S:g} s of the stop request; its process was "
                "killed; the figures measured until then are kept"
            )
        else:
            d.over.wait()
            died = d.death if isinstance(d.death, Died) else Died(f"{self.what}'s process is gone", [])
            out.status, out.error = "failed", str(died)
            out.environment["engine_last_words"] = died.detail
        return out

    def _died(self, how: str, signal_name: str | None) -> Died:
        child = self._child
        return Died(f"{self.what}'s process died {self._phase} ({how})", child.stderr_tail() if child else [])


class Died(RunFailed):
    def __init__(self, message: str, detail: list[str]):
        self.detail = detail
        super().__init__(message + (f": {detail[-1]}" if detail else ""))
