"""How one writer thread moves a state from GPU memory into a new file, by each path (the way back of
``fetchers``).

* ``bounce``: each request copied into a pinned buffer (``cuMemcpyDtoH``, waited for), then written with O_DIRECT.
* ``bounce-async``: the same through two pinned buffers taking turns, the next request's copy under way while the
  last one is written.
* ``cufile``: ``cuFileWrite`` straight from GPU memory (cuFile's compat mode where nvidia-fs is absent).

A file's last bytes beyond a 4 KiB boundary cannot go with O_DIRECT: they are copied to the pinned buffer and
written with O_DIRECT cleared on the descriptor. Every file is created here (never an existing one) and, with
``fsync``, synced (timed apart). Everything a storer allocates is freed by its ``GpuResources``.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import threading
import time
from typing import Any

from xferscope.errors import RunFailed
from xferscope.workloads.common.generated import ALIGN

#: one write call moves at most this
REQUEST = 16 << 20


class Storer:
    """One writer thread's path from GPU memory (``gpu``, in ``resources``) to files."""

    def __init__(self, gpu: int, resources: Any, request: int = REQUEST):
        from xferscope.engines import gpu_setup

        self.gpu, self.res, self.request = gpu, resources, request
        self.cu, self.check = gpu_setup.driver(), gpu_setup.check
        resources.context(gpu)
        self.staging = [resources.pinned_memory(gpu, request) for _ in range(self.buffers)]

    buffers = 1

    def store(self, path: str, dev: int, size: int, fsync: bool, stop: threading.Event) -> tuple[int, float, float]:
        """Write ``size`` bytes from GPU address ``dev`` into the new file ``path``: (bytes written, seconds
        writing, seconds in fsync)."""
        self.res.context(self.gpu)  # this thread's
        t0 = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o644)
        synced = 0.0
        try:
            body = size - size % ALIGN
            done = self.body(fd, dev, body, stop)
            if done == body and size > body and not stop.is_set():
                done += self._tail(fd, dev + body, body, size - body)
            if fsync:
                t1 = time.perf_counter()
                os.fsync(fd)
                synced = time.perf_counter() - t1
        except OSError as exc:
            raise RunFailed(f"writing {path}: {exc.strerror}") from None
        finally:
            os.close(fd)
        return done, time.perf_counter() - t0 - synced, synced

    def body(self, fd: int, dev: int, size: int, stop: threading.Event) -> int:
        """The file's whole 4 KiB blocks, from ``dev``; the bytes written."""
        raise NotImplementedError

    def _copy(self, host: int, dev: int, n: int) -> None:
        self.check(self.cu.cuMemcpyDtoH(host, dev, n), "cuMemcpyDtoH")

    def _pwrite(self, fd: int, host: int, n: int, offset: int) -> int:
        return os.pwrite(fd, memoryview((ctypes.c_char * n).from_address(host)).cast("B"), offset)

    def _tail(self, fd: int, dev: int, offset: int, n: int) -> int:
        self._copy(self.staging[0], dev, n)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_DIRECT)
        return self._pwrite(fd, self.staging[0], n, offset)


class BounceStorer(Storer):
    def body(self, fd: int, dev: int, size: int, stop: threading.Event) -> int:
        pos = 0
        while pos < size and not stop.is_set():
            n = min(self.request, size - pos)
            self._copy(self.staging[0], dev + pos, n)
            pos += self._pwrite(fd, self.staging[0], n, pos)
        return pos


class BounceAsyncStorer(Storer):
    """Two pinned buffers in turn: request ``i + 1`` is copied (on a stream of its own) while ``i`` is written."""

    buffers = 2

    def __init__(self, gpu: int, resources: Any, request: int = REQUEST):
        super().__init__(gpu, resources, request)
        self.stream = resources.stream(gpu)
        self.events = [resources.event(gpu) for _ in range(2)]

    def _issue(self, k: int, dev: int, n: int) -> None:
        cu, which = self.cu, k % 2
        self.check(cu.cuMemcpyDtoHAsync(self.staging[which], dev, n, self.stream), "cuMemcpyDtoHAsync")
        self.check(cu.cuEventRecord(self.events[which], self.stream), "cuEventRecord")

    def body(self, fd: int, dev: int, size: int, stop: threading.Event) -> int:
        count = -(-size // self.request)
        if not count:
            return 0
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


class CufileStorer(Storer):
    def __init__(self, gpu: int, resources: Any, request: int = REQUEST):
        super().__init__(gpu, resources, request)
        from xferscope.engines import cufile_driver

        self.cf = cufile_driver.module()
        cufile_driver.open_driver(gpu)

    def body(self, fd: int, dev: int, size: int, stop: threading.Event) -> int:
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
                wrote = int(cf.write(handle, dev, n, pos, pos))
                if wrote < n:
                    raise RunFailed(f"cuFileWrite at offset {pos} wrote {wrote} of {n} bytes")
                pos += wrote
            return pos
        finally:
            cf.handle_deregister(handle)


STORERS = {"bounce": BounceStorer, "bounce-async": BounceAsyncStorer, "cufile": CufileStorer}


def make_storer(path: str, gpu: int, resources: Any) -> Storer:
    return STORERS[path](gpu, resources)
