"""Does an I/O path go through the page cache? Ask the kernel, not the flags.

A file opened with O_DIRECT should leave the page cache alone, but a library
underneath may not honour it (cuFile's compat batch path reads through the page
cache even from an O_DIRECT descriptor). ``passes_through`` finds out with one
probe: evict a range's pages, do one I/O on it, ask ``mincore`` whether the
pages are now resident, evict them again. Outside any timed region.
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
