"""The child's side of work in a process of its own: one host for engine runs, memory sweeps and workloads.

What passes over the channel, in order (parent -> child on the left; ``xferscope.child_messages``):

    {job}                                 what the work asks during its set-up (an engine: Available), or Failed
    {the work's own commands}             ... its set-up's progress; the work's ready message, or Failed
    Start                                 the work's progress messages... as it sends them
    Stop (any time)                       Ended(payload, figures of the process, error, stuck), or Failed
    Close (any time)                      Closed(files left)

then the parent closes the channel and the process leaves, or sends the next job of the same kind, which the
process serves the same way with what it has opened (an engine kept for the next run of one command).

``serve_with(channel, make_work)`` reads the job and runs ``make_work(job)``, a ``Work``: ``build(talk)`` sets it
up outside the timed region (``talk.send`` for progress, ``talk.ask`` to send a message and wait for the parent's
answer, one of ``commands``); ``ready()`` is the message that says it is set up; ``run(stop, send)`` measures and
returns an ``WorkOutcome`` (or raises, before it measured anything: ``Failed``); ``interrupt()`` is told of a stop
the moment it comes; ``close()`` frees what it holds and names the files it could not remove. When the parent is
gone the work stops and closes, or, if it cannot within ``ORPHAN_GRACE_S``, ``abandon()`` removes what it made,
and the process leaves.
"""

from __future__ import annotations

import os
import queue
import resource
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from xferscope import child_messages as msg
from xferscope.isolation import Channel, ParentGone, error_to_wire

#: once the parent is gone, how long the work gets to stop and close by itself before ``abandon``
ORPHAN_GRACE_S = 15.0


class WorkOutcome(NamedTuple):
    """What a run gives: what it measured, its error, and whether its workers would not stop (left behind)."""

    payload: Any
    error: BaseException | None = None
    stuck: bool = False


class Talk:
    """What a work's set-up says to the parent: ``send`` a message, or ``ask`` and wait for the answer."""

    def __init__(self, host: ChildHost):
        self._host = host

    def send(self, message: Any) -> None:
        self._host.send(message)

    def ask(self, message: Any, kind: type, stop: threading.Event | None = None) -> Any:
        """Send ``message`` and wait for the parent's ``kind``; None when the parent closes the run first (or,
        given ``stop``, stops it)."""
        host = self._host
        host.send(message)
        while True:
            try:
                answer = host.answers.get(timeout=0.1 if stop is not None else 0.5)
            except queue.Empty:
                if host.closing.is_set() or (stop is not None and stop.is_set()):
                    return None
                continue
            return msg.expect(answer, kind)


class Work:
    """A piece of work the host runs; each step's default does nothing."""

    def build(self, talk: Talk) -> None:
        pass

    def ready(self) -> Any:
        """The message that says the work is set up (``child_messages.Ready``, or the work's own)."""
        raise NotImplementedError

    def run(self, stop: threading.Event, send: Callable[[Any], None]) -> WorkOutcome:
        raise NotImplementedError

    def interrupt(self) -> None:
        """A stop came (from the command thread): the work's own stop, where polling ``stop`` would be late."""

    def close(self) -> list[str]:
        return []

    def abandon(self) -> None:
        """The parent is gone and the work did not close in time: remove what it made."""


class ChildHost:
    def __init__(self, channel: Channel, job: Any, make_work: Callable[[Any], Work], commands: tuple[type, ...] = ()):
        self.channel = channel
        self.job = job
        self.make_work = make_work
        self.commands = commands
        self.work: Work | None = None
        self.stop = threading.Event()
        self.closing = threading.Event()
        #: the work's own commands, for ``Talk.ask``
        self.answers: queue.Queue[Any] = queue.Queue()
        self.stuck = False
        self._start = threading.Event()
        self._closed_sent = False

    def send(self, message: Any) -> None:
        try:
            self.channel.send(message)
        except OSError:  # the parent is gone; the main thread sees it too and cleans up
            pass

    def serve(self) -> Any:
        """Serve this job; the next one when the parent sends one after this one closed, else None."""
        life = threading.Thread(target=self._life, name="xferscope-work-life", daemon=True)
        life.start()
        next_job = None
        try:
            while True:
                try:
                    command = self.channel.recv()
                except EOFError:
                    if self._closed_sent:
                        break
                    raise ParentGone("the channel closed before the run did") from None
                if self._closed_sent:  # the next job, for this process
                    next_job = command
                    break
                self._handle(command)
        except ParentGone:
            self._orphaned(life)
            os._exit(0)
        life.join(ORPHAN_GRACE_S)
        if self.stuck:  # workers stuck in a driver call: do not wait for them
            sys.stderr.flush()
            os._exit(0)
        return next_job

    def _handle(self, command: Any) -> None:
        command = msg.heard(command, self.send, *self.commands, msg.Start, msg.Stop, msg.Close)
        if command is None:
            return
        if isinstance(command, msg.Start):
            self._start.set()
        elif isinstance(command, msg.Stop):
            self._stop()
        elif isinstance(command, msg.Close):
            self._stop()
            self.closing.set()
            self._start.set()
        else:
            self.answers.put(command)

    def _stop(self) -> None:
        self.stop.set()
        work = self.work
        if work is not None:
            work.interrupt()

    def _orphaned(self, life: threading.Thread) -> None:
        """The parent is gone: stop, close, leave; what the work could not remove by itself, ``abandon``."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        self._stop()
        self.closing.set()
        self._start.set()
        life.join(ORPHAN_GRACE_S)
        if life.is_alive() and self.work is not None:
            try:
                self.work.abandon()
            except Exception as exc:  # leaving anyway
                print(f"xferscope: removing what the work made failed: {exc!r}", file=sys.stderr)
        sys.stderr.flush()

    def _life(self) -> None:
        left: list[str] = []
        try:
            self.work = work = self.make_work(self.job)
            if self.stop.is_set():  # a stop came while the work was being made
                work.interrupt()
            work.build(Talk(self))
            self.send(work.ready())
            self._start.wait()
            before = resource.getrusage(resource.RUSAGE_SELF)
            outcome = work.run(self.stop, self.send)
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            process = msg.ProcessFigures(cpu_seconds=cpu, peak_rss_bytes=after.ru_maxrss * 1024)
            error = None if outcome.error is None else error_to_wire(outcome.error)
            self.stuck = outcome.stuck
            self.send(msg.Ended(outcome.payload, process, error, outcome.stuck))
        except BaseException as exc:  # before it measured anything: the set-up, or the start, failed
            self.send(msg.Failed(error_to_wire(exc)))
        finally:
            self.closing.wait()
            try:
                if self.work is not None:
                    left = self.work.close()
            finally:
                self._closed_sent = True
                self.send(msg.Closed(left))


def serve_with(
    channel: Channel, make_work: Callable[[Any], Work], job_kind: type = object, commands: tuple[type, ...] = ()
) -> None:
    """Serve each job (a ``job_kind``) the parent sends, one after the other, each with a ``make_work(job)``."""
    try:
        job = msg.expect(channel.recv(), job_kind)
    except EOFError:
        return
    while job is not None:
        job = ChildHost(channel, job, make_work, commands).serve()
        if job is not None:
            job = msg.expect(job, job_kind)
