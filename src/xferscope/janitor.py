"""Files this process made that must not outlive it, whatever ends it.

``guard(path)`` hands a scratch file or directory to a small process of its own
(started with the first one), ``release(path)`` takes it back once this process
has removed it (or keeps it on purpose). When this process ends with paths still
guarded (killed outright, a crash, a closed terminal before its handlers ran),
that process reads end-of-file on its pipe and removes them. It does nothing
else, so it cannot crash with what killed this one.

It watches this process, not a thread: it is told of no thread's end (no
PR_SET_PDEATHSIG), so a guarded path is never removed while this process lives.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import threading
from collections.abc import Iterator

from xferscope.isolation import Channel, Child, ParentGone

_lock = threading.Lock()
_child: Child | None = None
_counts: dict[str, int] = {}


def _send(message: tuple[str, str]) -> None:
    global _child
    if _child is None or _child.returncode is not None:
        if _child is None:
            atexit.register(_finish, os.getpid())
        _child = Child(serve, what="the scratch-file janitor", thread_death_signal=False)
        for path in _counts:  # a janitor that died: the new one takes over what the old one held
            _child.send(("add", path))
    _child.send(message)


def _finish(owner: int) -> None:
    """At this process's normal exit: the janitor told (end-of-file), and waited for, so that no process of ours
    outlives the command that started it (a kill still leaves it to notice the end-of-file by itself)."""
    child = _child
    if child is not None and os.getpid() == owner:  # not in a forked child, which shares no janitor of its own
        child.channel.close_write()
        child.wait(60.0)  # it removes what is still guarded, then ends; never killed mid-removal


def guard(path: str) -> None:
    """Remove ``path`` (file or directory tree) should this process end before ``release(path)``."""
    path = os.path.abspath(path)
    with _lock:
        _counts[path] = _counts.get(path, 0) + 1
        if _counts[path] == 1:
            _send(("add", path))


def release(path: str) -> None:
    path = os.path.abspath(path)
    with _lock:
        n = _counts.get(path, 0) - 1
        if n > 0:
            _counts[path] = n
            return
        if _counts.pop(path, None) is not None and _child is not None:
            _child.send(("remove", path))


@contextlib.contextmanager
def guarded(*paths: str) -> Iterator[None]:
    for p in paths:
        guard(p)
    try:
        yield
    finally:
        for p in paths:
            release(p)


def discard(path: str) -> None:
    """Remove a guarded file or directory tree now, and take it back from the watcher."""
    remove_path(os.path.abspath(path))
    release(path)


def remove_path(path: str) -> None:
    """Remove a file or a directory tree; nothing when it is not there."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def serve(channel: Channel) -> None:
    """The janitor's process: keep the list; at end-of-file (its parent ended) remove what is on it."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):  # only its parent's end ends it
        signal.signal(sig, signal.SIG_IGN)
    paths: set[str] = set()
    try:
        while True:
            try:
                kind, path = channel.recv()
            except (EOFError, OSError):
                break
            if kind == "add":
                paths.add(path)
            else:
                paths.discard(path)
    except ParentGone:
        pass
    for path in sorted(paths, key=len, reverse=True):
        remove_path(path)
