"""A workload's engine process: its set-up run by the one child host (``child_host``), its ticks as ``Tick``.

``make_setup(job)`` gives an object with ``build()`` (everything allocated before "ready", outside the timed
region), ``labels``, ``environment``, ``run(stop, on_tick) -> (payload, error or None)`` and ``close()``; it says
it is set up with ``Ready(labels, environment)``. A set-up that meets other ranks mid-run (``MeetsMidRun``) is
given ``meet(what)``, which waits at ``what`` until the parent says ``Go`` (True), or stops the run (False).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from xferscope import child_host
from xferscope.child_messages import Go, Meet, Ready, Tick
from xferscope.isolation import Channel
from xferscope.records import WorkloadEnvironment


class Setup(Protocol):
    labels: list[str]
    environment: WorkloadEnvironment

    def build(self) -> None: ...

    def run(self, stop: threading.Event, on_tick: Callable[[Any], None]) -> tuple[Any, BaseException | None]: ...

    def close(self) -> None: ...


@runtime_checkable
class MeetsMidRun(Protocol):
    def meet_with(self, meet: Callable[[str], bool]) -> None: ...


class WorkloadWork(child_host.Work):
    """A workload's set-up as the child host's work."""

    def __init__(self, setup: Setup):
        self.setup = setup
        self.talk: child_host.Talk | None = None

    def build(self, talk: child_host.Talk) -> None:
        self.talk = talk
        self.setup.build()

    def ready(self) -> Ready:
        return Ready(list(self.setup.labels), self.setup.environment.copy())

    def run(self, stop: threading.Event, send: Callable[[Any], None]) -> child_host.WorkOutcome:
        if stop.is_set():
            return child_host.WorkOutcome(None)
        talk = self.talk
        if isinstance(self.setup, MeetsMidRun) and talk is not None:
            self.setup.meet_with(lambda what: talk.ask(Meet(what), Go, stop) is not None)
        return child_host.WorkOutcome(*self.setup.run(stop, lambda progress: send(Tick(progress))))

    def close(self) -> list[str]:
        self.setup.close()
        return []


def serve_with(channel: Channel, make_setup: Callable[[Any], Setup]) -> None:
    child_host.serve_with(channel, lambda job: WorkloadWork(make_setup(job)), commands=(Go,))
