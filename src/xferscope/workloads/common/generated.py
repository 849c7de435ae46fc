"""A data set xferscope generates for a workload: a directory of its own (``xferscope-<what>-*`` under ``--dir``
or the scratch parent), guarded by the janitor from its creation and removed by ``close`` unless kept.

Nothing is written before the whole set is known to fit the free space. Each file is a header (given) followed
by xferscope's data pattern at the file's offsets, written with O_DIRECT where it works, synced and dropped
from the page cache, so the runs that follow start cold.
"""

from __future__ import annotations

import errno
import mmap
import os
import shutil
import tempfile
from collections.abc import Callable

from xferscope import janitor
from xferscope.errors import EnvironmentProblem, SpecError
from xferscope.target import Interrupted, default_scratch_parent, probe_direct_io
from xferscope.units import format_bytes

ALIGN = 4096
FILL_CHUNK = 8 << 20
#: free space left on the disk beyond the data set
DISK_MARGIN = 256 << 20


def parent_dir(directory: str | None, buffered: bool) -> tuple[str, bool]:
    """Where the set goes and whether O_DIRECT works there (``--dir`` checked: a SpecError naming it)."""
    if directory is None:
        parent, direct = default_scratch_parent()
        return parent, direct and not buffered
    parent = os.path.abspath(directory)
    if not os.path.isdir(parent):
        raise SpecError("dir", f"{directory}: no such directory")
    if not os.access(parent, os.W_OK):
        raise SpecError("dir", f"{directory}: not writable")
    return parent, probe_direct_io(parent)[0] and not buffered


def check_fits(parent: str, total: int, what: str, option: str, fix: str | Callable[[int], str]) -> None:
    """A SpecError naming ``option`` when ``total`` bytes (and a margin) do not fit the free space; ``fix`` says
    what to do (or makes it from the bytes that would fit)."""
    free = shutil.disk_usage(parent).free
    if total + DISK_MARGIN > free:
        hint = fix(max(0, free - DISK_MARGIN)) if callable(fix) else fix
        raise SpecError(
            option,
            f"{what} ({format_bytes(total)}) does not fit the free space of {parent} ({format_bytes(free)}); {hint}",
        )


class GeneratedDir:
    """The directory of a generated set; ``close(keep)`` removes it (unless kept) and releases the guard."""

    def __init__(self, parent: str, what: str, direct: bool):
        self.path = tempfile.mkdtemp(prefix=f"xferscope-{what}-", dir=parent)
        janitor.guard(self.path)
        self.direct = direct
        self.kept = False
        self.on_full = "make room, or choose --dir"
        self._open = True
        self._buf: mmap.mmap | None = None

    def write(
        self, path: str, size: int, seed: int, head: bytes = b"", cancel: Callable[[], bool] | None = None
    ) -> None:
        """Create ``path`` (inside this directory; never an existing file): ``head`` then the pattern."""
        from xferscope import _iocore

        if self._buf is None:
            self._buf = mmap.mmap(-1, FILL_CHUNK)
        buf = self._buf
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | (os.O_DIRECT if self.direct else 0), 0o644)
        try:
            off = 0
            while off < size:
                if cancel is not None and cancel():
                    raise Interrupted("interrupted while creating the data set")
                n = min(FILL_CHUNK, size - off)
                _iocore.fill_pattern(buf, off, seed)
                if off < len(head):
                    part = head[off : off + n]
                    buf[: len(part)] = part
                length = -(-n // ALIGN) * ALIGN if self.direct else n
                with memoryview(buf)[:length] as view:
                    try:
                        os.pwrite(fd, view, off)
                    except OSError as exc:
                        if exc.errno == errno.ENOSPC:
                            raise EnvironmentProblem(f"disk full while creating {path}; {self.on_full}") from None
                        raise EnvironmentProblem(f"cannot write {path}: {exc.strerror}") from None
                off += n
            if self.direct and size % ALIGN:
                os.ftruncate(fd, size)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def write_small(self, path: str, content: bytes) -> None:
        """A small file written as it is (through the page cache)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, content)
        finally:
            os.close(fd)

    def done_writing(self) -> None:
        if self._buf is not None:
            self._buf.close()
            self._buf = None

    def close(self, keep: bool = False) -> None:
        self.done_writing()
        if not self._open:
            return
        self._open = False
        if keep:
            self.kept = True
        else:
            shutil.rmtree(self.path, ignore_errors=True)
        janitor.release(self.path)


def direct_works(path: str) -> bool:
    """Does ``path`` open with O_DIRECT? (Nothing is written: the file is only opened.)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return False
    os.close(fd)
    return True
