"""Engine processes kept between the runs of one command (``compare``, ``saturate``, ``replay``, a console batch):
inside ``kept_engines()``, a run whose engine process closed cleanly hands it back here, and the next run of the
same path takes it instead of starting a new one, with what it has opened (its imports, CUDA initialised, the
cuFile driver). A process whose run failed, was killed or stuck is never handed back: the next run starts a fresh
one. Outside ``kept_engines()`` every run has a process of its own, as before. When the block ends, every kept
process is ended (and its cuFile log removed)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from xferscope import janitor
from xferscope.isolation import Child

_lock = threading.Lock()
#: path -> idle engine processes (isolation.Child), with the cuFile log each writes to (or None); None: not keeping
_idle: dict[str, list[tuple[Child, str | None]]] | None = None
_depth = 0


@contextlib.contextmanager
def kept_engines() -> Iterator[None]:
    """Keep engine processes between runs until the block ends (nested blocks share the outermost's)."""
    global _idle, _depth
    with _lock:
        _depth += 1
        if _idle is None:
            _idle = {}
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            ending = [] if _depth else [kept for kept_list in (_idle or {}).values() for kept in kept_list]
            if not _depth:
                _idle = None
        for child, log in ending:
            _end(child, log)


def keeping() -> bool:
    return _idle is not None


def take(path: str) -> tuple[Child, str | None] | None:
    """An idle engine process for ``path`` that is still alive, with its cuFile log; None when there is none."""
    with _lock:
        kept = (_idle or {}).get(path) or []
        while kept:
            child, log = kept.pop()
            if child.returncode is None:
                return child, log
            _end(child, log)
    return None


def give_back(path: str, child: Child, log: str | None) -> bool:
    """Keep ``child`` for the next run of ``path``; False (the caller ends it) when not keeping."""
    with _lock:
        if _idle is None or child.returncode is not None:
            return False
        _idle.setdefault(path, []).append((child, log))
        return True


def _end(child: Child, log: str | None) -> None:
    with contextlib.suppress(Exception):
        child.end(grace_s=5.0)
    if log:
        janitor.discard(log)
