"""What a run's parent and its child process say to each other: one vocabulary, as msgspec ``Struct``s.

Parent -> child, after the job: ``Start``, ``Stop`` (any time), ``Close`` (any time).
Child -> parent: ``Ready`` (set up, with its labels and environment) or ``Failed``, with ``Progress`` while it
sets up; then ``Tick``s as the run reports them (and, for a run that meets other ranks mid-run, ``Meet``, which
the parent answers with ``Go`` once every rank is there, or with ``Stop``); ``Ended`` (what it measured, the process's own figures, its
error); ``Closed`` last. A run kind adds the messages of its own steps (an engine's: ``engine_process``).

They travel pickled over ``isolation.Channel``. ``expect`` turns anything else into one clear error, so a side
that receives a message it does not know says so instead of misreading it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from xferscope.errors import RunFailed
from xferscope.isolation import WireError, error_to_wire
from xferscope.records import WorkloadEnvironment


class Start(msgspec.Struct, frozen=True):
    """Begin the timed region."""


class Stop(msgspec.Struct, frozen=True):
    """End the run early; keep what was measured."""


class Close(msgspec.Struct, frozen=True):
    """Stop if running, free everything, say ``Closed``."""


class Ready(msgspec.Struct, frozen=True):
    """Set up, outside the timed region: what the run is (labels) and where it runs (environment)."""

    labels: list[str]
    environment: WorkloadEnvironment


class Failed(msgspec.Struct, frozen=True):
    """The set-up failed: the error, as ``isolation.error_to_wire`` gives it."""

    error: WireError


class Progress(msgspec.Struct, frozen=True):
    """Set-up under way: ``done`` of ``total`` (bytes of a file being filled)."""

    done: int
    total: int


class Tick(msgspec.Struct, frozen=True):
    """What the run reported while running (its own type: a workload's progress)."""

    progress: Any


class Meet(msgspec.Struct, frozen=True):
    """Mid-run: the run waits at ``what`` until the parent says ``Go`` (ranks of an MPI job meet there)."""

    what: str


class Go(msgspec.Struct, frozen=True):
    """Every rank is at the meeting: go on."""


class ProcessFigures(msgspec.Struct, frozen=True):
    """The child process's own cost over the run."""

    cpu_seconds: float | None = None
    peak_rss_bytes: int | None = None


class Ended(msgspec.Struct, frozen=True):
    """The run is over: what it measured (None where it never ran), the process's figures, its error."""

    payload: Any = None
    process: ProcessFigures = ProcessFigures()
    error: WireError | None = None
    stuck: bool = False  # its workers did not stop when asked (left behind, with what they measured)


class Closed(msgspec.Struct, frozen=True):
    """Everything is freed; the files the run had created and could not remove."""

    left: list[str] = []


class UnknownMessage(RunFailed):
    """A message that is not one of those expected here."""


def unexpected(message: Any, *kinds: type) -> UnknownMessage:
    """The error for ``message``, which is none of ``kinds``: what came, and what was expected."""
    names = ", ".join(k.__name__ for k in kinds)
    return UnknownMessage(f"unexpected message {type(message).__name__} {message!r:.80}; expected one of: {names}")


def expect(message: Any, *kinds: type) -> Any:
    """``message`` when it is one of ``kinds``; else raises UnknownMessage (``unexpected``)."""
    if isinstance(message, kinds):
        return message
    raise unexpected(message, *kinds)


def heard(command: Any, answer: Callable[[Any], None], *kinds: type) -> Any:
    """In a child: ``command`` when it is one of ``kinds``; else None, after answering ``Failed`` naming it (the
    child goes on as if it had not come)."""
    if isinstance(command, kinds):
        return command
    answer(Failed(error_to_wire(unexpected(command, *kinds))))
    return None
