"""The child's side of work in a process of its own: one host for memory sweeps and workloads.

What passes over the channel, in order (parent -> child on the left; ``xferscope.child_messages``):

    {job}                                 the work's ready message (its set-up) or Failed(error)
    Start                                 the work's progress messages… as it sends them
    Stop (any time)                       Ended(payload, figures of the process, error)
    Close (any time)                      Closed

``serve_with(channel, make_work)`` reads the job and runs ``make_work(job)``: an object with ``build()``
(everything allocated before ready, outside the timed region), ``ready()`` (the message that says it is set up),
``run(stop, send) -> (payload, error or None)`` (``send`` carries its progress messages; ``stop`` is set when it
must stop and keep what it measured) and ``close()``. When the parent is gone the work stops, frees what it holds
and the process leaves.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

from xferscope import child_messages as msg
from xferscope.isolation import Channel, ParentGone, command_loop, error_to_wire


class Work(Protocol):
    def build(self) -> None: ...

    def ready(self) -> Any: ...

    def run(self, stop: threading.Event, send: Callable[[Any], None]) -> tuple[Any, BaseException | None]: ...

    def close(self) -> None: ...


class ChildHost:
    def __init__(self, channel: Channel, job: Any, make_work: Callable[[Any], Work]):
        self.channel = channel
        self.job = job
        self.make_work = make_work
        self.stop = threading.Event()
        self._start = threading.Event()
        self._close = threading.Event()
        self._done = threading.Event()

    def send(self, message: Any) -> None:
        try:
            self.channel.send(message)
        except OSError:
            pass

    def serve(self) -> None:
        life = threading.Thread(target=self._life, name="xferscope-work-life", daemon=True)
        life.start()
        try:
            command_loop(self.channel, self._handle, lambda: not self._done.is_set(), self._done.is_set)
        except ParentGone:
            self.stop.set()
            self._close.set()
            self._start.set()
            life.join(30)
            sys.stderr.flush()
            os._exit(0)
        life.join(30)

    def _handle(self, command: Any) -> None:
        command = msg.heard(command, self.send, msg.Start, msg.Stop, msg.Close)
        if command is None:
            return
        if isinstance(command, msg.Start):
            self._start.set()
        elif isinstance(command, msg.Stop):
            self.stop.set()
        else:
            self.stop.set()
            self._close.set()
            self._start.set()

    def _life(self) -> None:
        try:
            work = self.make_work(self.job)
        except BaseException as exc:
            self.send(msg.Failed(error_to_wire(exc)))
            self._close.wait()
            self.send(msg.Closed())
            self._done.set()
            return
        try:
            try:
                work.build()
                ready = work.ready()
            except BaseException as exc:
                self.send(msg.Failed(error_to_wire(exc)))
                return
            self.send(ready)
            self._start.wait()
            if self.stop.is_set():
                self.send(msg.Ended())
                return
            before = resource.getrusage(resource.RUSAGE_SELF)
            try:
                payload, failed = work.run(self.stop, self.send)
            except BaseException as exc:  # pragma: no cover - the works catch their threads' errors
                payload, failed = None, exc
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            process = msg.ProcessFigures(cpu_seconds=cpu, peak_rss_bytes=after.ru_maxrss * 1024)
            self.send(msg.Ended(payload, process, None if failed is None else error_to_wire(failed)))
        finally:
            self._close.wait()
            try:
                work.close()
            finally:
                self.send(msg.Closed())
                self._done.set()


def serve_with(channel: Channel, make_work: Callable[[Any], Work]) -> None:
    try:
        job = channel.recv()
    except EOFError:
        return
    ChildHost(channel, job, make_work).serve()
