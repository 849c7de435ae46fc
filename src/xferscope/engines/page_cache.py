"""Does an I/O path go through the page cache? Ask the kernel, not the flags.

A file opened with O_DIRECT should leave the page cache alone, but a library
underneath may not honour it (cuFile's compat batch path reads through the page
cache even from an O_DIRECT descriptor). ``passes_through`` finds out with one
probe: evict a range's pages, do one I/O on it, ask ``mincore`` whether the
pages are now resident, evict them again. Outside any timed region.

``hold`` does the opposite for ``--source cache``: it reads a file once through
the page cache, so that every run after it reads memory, not storage, and
``resident_share`` says how much of it stayed there.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
from collections.abc import Callable

PAGE = mmap.PAGESIZE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_MAP_FAILED = ctypes.c_void_p(-1).value


def _page_span(offset: int, length: int) -> tuple[int, int]:
    start = offset - offset % PAGE
    end = -(-(offset + length) // PAGE) * PAGE
    return start, end - start


def resident_bytes(path: str, offset: int = 0, length: int | None = None) -> int | None:
    """Bytes of ``path`` in [offset, offset+length) held in the page cache (whole pages); None if unknown."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if length is None:
            length = size - offset
        length = min(length, size - offset)
        if length <= 0:
            return 0
        start, span = _page_span(offset, length)
        addr = _libc.mmap(None, span, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
        if addr in (None, _MAP_FAILED):
            return None
        try:
            vec = (ctypes.c_ubyte * (span // PAGE))()
            if _libc.mincore(ctypes.c_void_p(addr), span, vec) != 0:
                return None
            return sum(b & 1 for b in vec) * PAGE
        finally:
            _libc.munmap(ctypes.c_void_p(addr), span)
    finally:
        os.close(fd)


def evict(path: str, offset: int = 0, length: int = 0) -> None:
    """Write back and drop the page cache's copy of a range (0 = to the end); no root needed."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def evict_files(paths: list[str]) -> float | None:
    """Write back and drop the page cache's copy of each file that exists; the share of their bytes still
    resident afterwards (0.0 for no file; None where it cannot be told)."""
    present = [p for p in paths if os.path.exists(p)]
    for path in present:
        evict(path)
    return resident_share(present) if present else 0.0


def passes_through(path: str, offset: int, length: int, io: Callable[[], object]) -> bool | None:
    """True when ``io`` (one I/O on that range) left its pages in the page cache, False when it did
    not, None when it cannot be told (the pages would not leave the cache first: tmpfs, pinned)."""
    evict(path, offset, length)
    if resident_bytes(path, offset, length) != 0:
        return None
    try:
        io()
        after = resident_bytes(path, offset, length)
    finally:
        evict(path, offset, length)
    if after is None:
        return None
    return after > 0


def resident_share(paths: list[str]) -> float | None:
    """The share (0..1) of the files' bytes held in the page cache now; None where it cannot be told."""
    total = held = 0
    for path in paths:
        got = resident_bytes(path)
        if got is None:
            return None
        size = os.path.getsize(path)
        total += size
        held += min(got, size)
    return held / total if total else None


HOLD_CHUNK = 8 << 20


def hold(paths: list[str], cancel: Callable[[], bool] | None = None) -> float | None:
    """Read the files once through the page cache, so that the runs that follow read them from memory (--source
    cache); the share of their bytes resident afterwards (None where it cannot be told). Outside any timed
    region; what is resident already is read at memory speed."""
    buf = bytearray(HOLD_CHUNK)
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            with contextlib.suppress(OSError):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            off = 0
            while True:
                if cancel is not None and cancel():
                    return resident_share(paths)
                n = os.preadv(fd, [buf], off)
                if n <= 0:
                    break
                off += n
        finally:
            os.close(fd)
    return resident_share(paths)
