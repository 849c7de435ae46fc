"""How one writer thread moves part of a state (a ``fetchers.Slot``, in host or GPU memory) into a new file, by each
path (the way back of ``fetchers``).

* ``host``: through the page cache, as ``torch.save`` writes: from host memory (DLIO's CPU tensors), or from GPU
  memory each request copied into pageable host memory first (``cuMemcpyDtoH``, which the driver stages through
  pinned buffers of its own), as a GPU tensor's storage is copied to the CPU before it is written; with
  ``checksum``, every byte summed (CRC-32) as ``torch.save``'s zip records are.
* ``bounce``: each request copied into a pinned buffer (``cuMemcpyDtoH``, waited for), then written with O_DIRECT.
* ``bounce-async``: the same through two pinned buffers taking turns, the next request's copy under way while the
  last one is written.
* ``cufile``: ``cuFileWrite`` straight from GPU memory (cuFile's compat mode where nvidia-fs is absent).
* A state already copied to pinned host memory (an asynchronous save's copy) is written from there: with O_DIRECT
  by the GPU paths but cufile, through the page cache by host (``HostStorer``).

With O_DIRECT a file's last bytes beyond a 4 KiB boundary cannot go that way: they are written with O_DIRECT
cleared on the descriptor (from the pinned buffer where the state is in GPU memory). Every file is created here
(never an existing one) and, with ``fsync``, synced (timed apart). What a GPU storer allocates is freed by its
``GpuResources``.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import threading
import time
import zlib
from typing import Any

from xferscope.errors import RunFailed
from xferscope.workloads.common.fetchers import Slot
from xferscope.workloads.common.generated import ALIGN
from xferscope.workloads.common.gpu_memory import pinned

#: one write call moves at most this
REQUEST = 16 << 20


class Storer:
    """One writer thread's path from ``state`` to files."""

    #: whether the path writes with O_DIRECT
    direct = True
    #: which memory each pinned staging buffer of its own is (``gpu_memory.pinned``); none where it has none
    pinned_kinds: tuple[str, ...] = ()

    def __init__(self, state: Slot, request: int = REQUEST):
        self.state, self.request = state, request
        #: bytes written so far, over every file, and whether it is in an fsync now (read by another thread for
        #: live figures)
        self.written = 0
        self.syncing = False
        #: torch.save's way: the CRC-32 of every byte written, as its zip records carry one (the CPU it costs)
        self.checksum = False
        self.crc = 0

    def _sum(self, data: memoryview) -> memoryview:
        if self.checksum:
            self.crc = zlib.crc32(data, self.crc)
        return data

    def _count(self, n: int) -> int:
        self.written += n
        return n

    def store(self, path: str, at: int, size: int, fsync: bool, stop: threading.Event) -> tuple[int, float, float]:
        """Write the state's ``size`` bytes from ``at`` into the new file ``path``: (bytes written, seconds writing,
        seconds in fsync)."""
        self.begin()
        t0 = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | (os.O_DIRECT if self.direct else 0), 0o644)
        synced = 0.0
        try:
            body = size - size % ALIGN if self.direct else size
            done = self.body(fd, at, body, stop)
            if done == body and size > body and not stop.is_set():
                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_DIRECT)
                done += self.tail(fd, at + body, body, size - body)
            if fsync:
                t1 = time.perf_counter()
                self.syncing = True
                try:
                    os.fsync(fd)
                finally:
                    self.syncing = False
                synced = time.perf_counter() - t1
        except OSError as exc:
            raise RunFailed(f"writing {path}: {exc.strerror}") from None
        finally:
            os.close(fd)
        return done, time.perf_counter() - t0 - synced, synced

    def begin(self) -> None:
        """Before a file, in the writing thread."""

    def body(self, fd: int, at: int, size: int, stop: threading.Event) -> int:
        """The state's ``size`` bytes from ``at`` to the file's start (whole 4 KiB blocks with O_DIRECT); the bytes
        written."""
        raise NotImplementedError

    def tail(self, fd: int, at: int, offset: int, n: int) -> int:
        """The last ``n`` bytes (under a block), from the state's ``at`` to the file's ``offset``, O_DIRECT cleared."""
        raise NotImplementedError


class HostStorer(Storer):
    """From host memory: through the page cache, or with O_DIRECT (``direct``: the state is pinned, 4 KiB aligned
    where each file begins)."""

    def __init__(self, state: Slot, request: int = REQUEST, direct: bool = False):
        super().__init__(state, request)
        self.direct = direct

    def body(self, fd: int, at: int, size: int, stop: threading.Event) -> int:
        view = self.state.host
        assert view is not None
        pos = 0
        while pos < size and not stop.is_set():
            pos += self._count(os.pwrite(fd, self._sum(view[at + pos : at + min(size, pos + self.request)]), pos))
        return pos

    def tail(self, fd: int, at: int, offset: int, n: int) -> int:
        view = self.state.host
        assert view is not None
        return self._count(os.pwrite(fd, self._sum(view[at : at + n]), offset))


class GpuStorer(Storer):
    """From GPU memory (``gpu``, in ``resources``), through pinned buffers of its own."""

    buffers = 1

    def __init__(self, state: Slot, gpu: int, resources: Any, request: int = REQUEST):
        super().__init__(state, request)
        self.gpu, self.res = gpu, resources
        resources.context(gpu)
        self.staging = self._staging()

    def _staging(self) -> list[int]:
        got = [pinned(self.res, self.gpu, self.request) for _ in range(self.buffers)]
        self.pinned_kinds = tuple(kind for _, kind in got)
        return [address for address, _ in got]

    @property
    def dev(self) -> int:
        assert self.state.dev is not None
        return self.state.dev

    def begin(self) -> None:
        self.res.context(self.gpu)  # this thread's

    def _copy(self, host: int, dev: int, n: int) -> None:
        self.res.copy(self.gpu, host, dev, n, "dtoh")

    def _pwrite(self, fd: int, host: int, n: int, offset: int) -> int:
        data = self._sum(memoryview((ctypes.c_char * n).from_address(host)).cast("B"))
        return self._count(os.pwrite(fd, data, offset))

    def tail(self, fd: int, at: int, offset: int, n: int) -> int:
        self._copy(self.staging[0], self.dev + at, n)
        return self._pwrite(fd, self.staging[0], n, offset)


class BounceStorer(GpuStorer):
    def body(self, fd: int, at: int, size: int, stop: threading.Event) -> int:
        pos = 0
        while pos < size and not stop.is_set():
            n = min(self.request, size - pos)
            self._copy(self.staging[0], self.dev + at + pos, n)
            pos += self._pwrite(fd, self.staging[0], n, pos)
        return pos


class PageableStorer(BounceStorer):
    """The host path from GPU memory: each request copied into pageable host memory, then written through the page
    cache (as ``torch.save`` writes a GPU tensor: its storage copied to the CPU first)."""

    direct = False

    def _staging(self) -> list[int]:
        self._pages = (ctypes.c_char * self.request)()
        ctypes.memset(self._pages, 0xFF, self.request)  # faulted in now, outside the timed region
        return [ctypes.addressof(self._pages)]


class BounceAsyncStorer(GpuStorer):
    """Two pinned buffers in turn: request ``i + 1`` is copied (on a stream of its own) while ``i`` is written."""

    buffers = 2

    def __init__(self, state: Slot, gpu: int, resources: Any, request: int = REQUEST):
        from xferscope.engines import gpu_setup

        super().__init__(state, gpu, resources, request)
        self.cu, self.check = gpu_setup.driver(), gpu_setup.check
        self.stream = resources.stream(gpu)
        self.events = [resources.event(gpu) for _ in range(2)]

    def _issue(self, k: int, dev: int, n: int) -> None:
        cu, which = self.cu, k % 2
        self.check(cu.cuMemcpyDtoHAsync(self.staging[which], dev, n, self.stream), "cuMemcpyDtoHAsync")
        self.check(cu.cuEventRecord(self.events[which], self.stream), "cuEventRecord")

    def body(self, fd: int, at: int, size: int, stop: threading.Event) -> int:
        count = -(-size // self.request)
        if not count:
            return 0
        dev = self.dev + at
        self._issue(0, dev, min(self.request, size))
        pos = 0
        for k in range(count):
            n = min(self.request, size - pos)
            self.check(self.cu.cuEventSynchronize(self.events[k % 2]), "cuEventSynchronize")
            if stop.is_set():
                break
            if k + 1 < count:
                nxt = pos + n
                self._issue(k + 1, dev + nxt, min(self.request, size - nxt))
            pos += self._pwrite(fd, self.staging[k % 2], n, pos)
        self.check(self.cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")  # nothing left in flight
        return pos


class CufileStorer(GpuStorer):
    def __init__(self, state: Slot, gpu: int, resources: Any, request: int = REQUEST):
        super().__init__(state, gpu, resources, request)
        from xferscope.engines import cufile_driver

        self.cf = cufile_driver.module()
        cufile_driver.open_driver(gpu)

    def body(self, fd: int, at: int, size: int, stop: threading.Event) -> int:
        from xferscope.engines import cufile_driver, gpu_setup
        from xferscope.target import filesystem_of

        cf = self.cf
        descr = cf.Descr()
        descr.type = cf.FileHandleType.OPAQUE_FD
        descr.handle.fd = fd
        descr.fs_ops = 0
        mark = cufile_driver.log().mark()
        with gpu_setup.interrupts_deferred():
            try:
                handle = int(cf.handle_register(descr.ptr))
            except Exception as exc:
                path = os.readlink(f"/proc/self/fd/{fd}")
                raise RunFailed(
                    cufile_driver.explain_registration(
                        exc, cufile_driver.log().since(mark), path, filesystem_of(path).fstype
                    )
                ) from None
        try:
            pos = 0
            while pos < size and not stop.is_set():
                n = min(self.request, size - pos)
                wrote = int(cf.write(handle, self.dev + at, n, pos, pos))
                if wrote < n:
                    raise RunFailed(f"cuFileWrite at offset {pos} wrote {wrote} of {n} bytes")
                pos += self._count(wrote)
            return pos
        finally:
            cf.handle_deregister(handle)


GPU_STORERS = {"bounce": BounceStorer, "bounce-async": BounceAsyncStorer, "cufile": CufileStorer}


def make_storer(path: str, state: Slot, gpu: int | None, resources: Any, checksum: bool = False) -> Storer:
    """``path``'s writer of ``state``: from host memory where the state is there (pinned, for an asynchronous
    save's copy, and so written with O_DIRECT by the GPU paths), else from GPU memory on ``gpu``. ``checksum``:
    the host path sums every byte as ``torch.save`` does (CRC-32)."""
    storer: Storer
    if state.host is not None:
        storer = HostStorer(state, direct=path != "host")
    elif path == "host":
        assert gpu is not None
        storer = PageableStorer(state, gpu, resources)
    else:
        assert gpu is not None
        storer = GPU_STORERS[path](state, gpu, resources)
    storer.checksum = checksum and path == "host"
    return storer
