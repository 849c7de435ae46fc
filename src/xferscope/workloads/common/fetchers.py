"""How one reader thread moves a sample from its file into a batch buffer, by each path.

* ``host``: pread into the batch buffer in host memory (as DLIO, whose data stops there).
* ``bounce`` and ``bounce-async``: the native core's code that ``run`` runs for them (``BounceFetcher``).
* ``cufile``: cuFileRead straight into GPU memory (cuFile's compat mode where nvidia-fs is absent).

Requests are ``--bs`` long; with O_DIRECT a sample's range is widened to 4 KiB boundaries (the bytes counted
are the sample's). Everything a fetcher allocates is freed by ``close()``; GPU and pinned memory through
``GpuResources``.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from typing import Any

from xferscope.errors import EnvironmentProblem, RunFailed
from xferscope.workloads.common.data_files import SampleRef
from xferscope.workloads.common.generated import ALIGN
from xferscope.workloads.common.gpu_memory import pinned


class Slot:
    """One batch buffer: host memory (``host``, a writable view) or GPU memory (``dev``) of ``capacity`` bytes."""

    def __init__(self, capacity: int, host: memoryview | None = None, dev: int | None = None, free=None):
        self.capacity = capacity
        self.host = host
        self.dev = dev
        self._free = free

    def close(self) -> None:
        if self.host is not None:
            self.host.release()
            self.host = None
        if self._free is not None:
            self._free()
            self._free = None


def host_slot(capacity: int) -> Slot:
    """A batch buffer in host memory: on 2 MiB transparent huge pages where the kernel offers them (the memory
    the host path reads into; an O_DIRECT read into 4 KiB pages can be split into many), else an anonymous
    mapping. Its pages are faulted in now, outside the timed region."""
    from xferscope.engines import gpu_setup, host

    if host.huge_pages_offered():
        raw, length, base = gpu_setup.map_huge_pages(capacity)
        view = memoryview((ctypes.c_char * capacity).from_address(base)).cast("B")
        return Slot(capacity, host=view, free=lambda: gpu_setup.unmap(raw, length))
    buf = mmap.mmap(-1, capacity)
    buf.write(bytes(capacity))
    return Slot(capacity, host=memoryview(buf), free=buf.close)


class Fetcher:
    """One reader thread's path. ``read`` puts ``sample`` at ``slot`` offset ``at`` (4 KiB aligned)."""

    #: whether this path reads with O_DIRECT where the data set allows it (a mapped file cannot)
    uses_direct = True

    def __init__(self, data: Any, block_size: int):
        self.data = data  # TrainData, or transfer.Files: .files (each .path, .size) and .direct
        self.bs = block_size
        self._file: int | None = None
        self._fd = -1

    def fd_for(self, file: int) -> int:
        if file != self._file:
            self.close_file()
            path = self.data.files[file].path
            try:
                self._fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if self.direct else 0))
            except OSError as exc:
                raise RunFailed(f"cannot open {path}: {exc.strerror}") from None
            self._file = file
            self.opened(file)
        return self._fd

    def opened(self, file: int) -> None:
        """A new file is open (cuFile registers its handle here)."""

    def close_file(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._file = -1, None

    @property
    def direct(self) -> bool:
        return self.data.direct and self.uses_direct

    def extent(self, sample: SampleRef) -> tuple[int, int]:
        """(file offset, length) to read for ``sample``."""
        return sample.span if self.direct else (sample.offset, sample.length)

    def read(self, sample: SampleRef, slot: Slot, at: int) -> None:
        raise NotImplementedError

    def batch_done(self) -> None:
        """Every copy of the batch has landed (the async paths wait here)."""

    def close(self) -> None:
        self.close_file()

    def _short(self, sample: SampleRef, got: int, want: int) -> RunFailed:
        path = self.data.files[sample.file].path
        return RunFailed(f"short read of {path} at {sample.offset}: {got} of {want} bytes (the file changed?)")


def _pread(fd: int, view: memoryview, offset: int) -> int:
    try:
        return os.preadv(fd, [view], offset)
    except OSError as exc:
        raise RunFailed(f"read failed at offset {offset}: {exc.strerror}") from None


class HostFetcher(Fetcher):
    def read(self, sample: SampleRef, slot: Slot, at: int) -> None:
        fd = self.fd_for(sample.file)
        start, length = self.extent(sample)
        whole = slot.host
        assert whole is not None
        pos = 0
        while pos < length:
            n = min(self.bs, length - pos)
            got = _pread(fd, whole[at + pos : at + pos + n], start + pos)
            pos += got
            if got < n:
                break
        if pos < sample.offset - start + sample.length:
            raise self._short(sample, pos, length)


# ------------------------------------------------------------------ the GPU paths


class GpuFetcher(Fetcher):
    """Shared by the paths whose data lands in GPU memory: the reader's context."""

    def __init__(self, data: Any, block_size: int, gpu: int, resources):
        super().__init__(data, block_size)
        self.gpu = gpu
        self.res = resources
        resources.context(gpu)


#: bounce-async in a workload's reader: blocks under this get four groups, others two (a workload keeps its own
#: batches in flight; each reader's pinned staging is on top of them)
STAGING_GROUP_BYTES = 1 << 20


class BounceFetcher(GpuFetcher):
    """The bounce paths through the native core's ring, the code ``run --path bounce|bounce-async`` runs
    (``_iocore.Stager``): ``bounce`` reads into one pinned buffer of ``--bs`` and waits for each copy (asking at
    once, as bounce does); ``bounce-async`` reads as ``run``'s bounce-async does (groups taking turns, or one
    buffer with each copy waited for, whichever its trial measures faster), with fewer groups: two, four for
    blocks under 1 MiB. The pinned buffers are ``gpu_memory.pinned``'s: on 2 MiB huge pages pinned with
    cuMemHostRegister where the kernel offers them, else CUDA's own."""

    def __init__(self, data: Any, block_size: int, gpu: int, resources, asynchronous: bool):
        super().__init__(data, block_size, gpu, resources)
        from xferscope import _iocore
        from xferscope.engines import bounce

        if asynchronous:  # a reader's staging stays lean: two groups (four for blocks under 1 MiB)
            group = bounce.copy_group(block_size)
            count = (2 if block_size >= STAGING_GROUP_BYTES else 4) * group
        else:
            group, count = 1, 1
        stride = -(-block_size // ALIGN) * ALIGN
        base, _ = pinned(resources, gpu, count * stride)
        self.stager = _iocore.Stager(
            resources.functions(),
            resources.context_handle(gpu),
            int(resources.stream(gpu)),
            [base + i * stride for i in range(count)],
            [int(resources.event(gpu)) for _ in range(count)],
            block_size,
            copy_batch=group,
            turns=_iocore.TURNS_AUTO if asynchronous else _iocore.TURNS_NEVER,
            prompt=not asynchronous,
        )

    def read(self, sample: SampleRef, slot: Slot, at: int) -> None:
        fd = self.fd_for(sample.file)
        start, length = self.extent(sample)
        assert slot.dev is not None
        try:
            self.stager.read(fd, start, length, slot.dev + at, sample.offset - start + sample.length)
        except RuntimeError as exc:
            raise RunFailed(f"{self.data.files[sample.file].path}: {exc}") from None

    def batch_done(self) -> None:
        try:
            self.stager.drain()
        except RuntimeError as exc:
            raise RunFailed(str(exc)) from None

    def buffer_use(self) -> tuple[int, bool, int, int]:
        """(buffers read into, on one buffer now, the last trial's mean ns a block on one buffer and taking
        turns)."""
        return self.stager.use()

    def close(self) -> None:
        try:
            self.batch_done()
        finally:
            super().close()


class CufileFetcher(GpuFetcher):
    def __init__(self, data: Any, block_size: int, gpu: int, resources):
        super().__init__(data, block_size, gpu, resources)
        from xferscope.engines import cufile_driver

        self.cf = cufile_driver.module()
        cufile_driver.open_driver(gpu)
        self._handle: int | None = None

    def opened(self, file: int) -> None:
        from xferscope.engines import cufile_driver, gpu_setup
        from xferscope.target import filesystem_of

        path = self.data.files[file].path
        cf = self.cf
        descr = cf.Descr()
        descr.type = cf.FileHandleType.OPAQUE_FD
        descr.handle.fd = self._fd
        descr.fs_ops = 0
        mark = cufile_driver.log().mark()
        with gpu_setup.interrupts_deferred():
            try:
                self._handle = int(cf.handle_register(descr.ptr))
            except Exception as exc:
                fstype = filesystem_of(path).fstype
                raise EnvironmentProblem(
                    cufile_driver.explain_registration(exc, cufile_driver.log().since(mark), path, fstype)
                ) from None

    def close_file(self) -> None:
        if self._handle is not None:
            try:
                self.cf.handle_deregister(self._handle)
            finally:
                self._handle = None
        super().close_file()

    def read(self, sample: SampleRef, slot: Slot, at: int) -> None:
        self.fd_for(sample.file)
        start, length = self.extent(sample)
        assert slot.dev is not None
        pos = 0
        while pos < length:
            n = min(self.bs, length - pos)
            try:
                got = int(self.cf.read(self._handle, slot.dev, n, start + pos, at + pos))
            except Exception as exc:
                raise RunFailed(f"cuFileRead at offset {start + pos} failed: {exc}") from None
            if got < 0:
                raise RunFailed(f"cuFileRead at offset {start + pos} failed: {got}")
            pos += got
            if got < n:
                break
        if pos < sample.offset - start + sample.length:
            raise self._short(sample, pos, length)


class PageableFetcher(GpuFetcher):
    """The host path into GPU memory, as ``torch.load`` and then ``.to(device)``: each request read through the
    page cache into pageable host memory, then copied to the GPU (``cuMemcpyHtoD``, which the driver stages through
    pinned buffers of its own)."""

    uses_direct = False

    def __init__(self, data: Any, block_size: int, gpu: int, resources):
        super().__init__(data, block_size, gpu, resources)
        self._pages = (ctypes.c_char * block_size)()
        ctypes.memset(self._pages, 0xFF, block_size)  # faulted in now, outside the timed region
        self._view = memoryview(self._pages).cast("B")

    def read(self, sample: SampleRef, slot: Slot, at: int) -> None:
        fd = self.fd_for(sample.file)
        assert slot.dev is not None
        pos = 0
        while pos < sample.length:
            n = min(self.bs, sample.length - pos)
            got = _pread(fd, self._view[:n], sample.offset + pos)
            if got:
                self.res.copy(self.gpu, slot.dev + at + pos, ctypes.addressof(self._pages), got, "htod")
            pos += got
            if got < n:
                break
        if pos < sample.length:
            raise self._short(sample, pos, sample.length)

    def close(self) -> None:
        super().close()
        self._view.release()


def make_fetcher(path: str, data: Any, block_size: int, gpu: int | None, resources: Any) -> Fetcher:
    if path == "host":
        return HostFetcher(data, block_size)
    if path == "mmap":
        return MmapCopyFetcher(data, block_size, gpu, resources)
    assert gpu is not None
    if path in ("bounce", "bounce-async"):
        return BounceFetcher(data, block_size, gpu, resources, asynchronous=path == "bounce-async")
    if path == "cufile":
        return CufileFetcher(data, block_size, gpu, resources)
    raise ValueError(path)


def slot_capacity(lengths: list[int], batch: int) -> int:
    """Bytes a batch buffer needs for any batch of samples of these lengths: the ``batch`` largest, each
    widened to 4 KiB boundaries and placed from one, in 2 MiB units."""
    widest = sorted(lengths, reverse=True)[:batch]
    need = sum(-(-(n + ALIGN) // ALIGN) * ALIGN + ALIGN for n in widest)
    return -(-need // (2 << 20)) * (2 << 20)


class MmapCopyFetcher(Fetcher):
    """``safetensors``' way: the file mapped, each piece copied out of the mapping by the driver from pageable
    memory to the GPU (cuMemcpyHtoD, which stages through its own pinned buffers), or into host memory where the
    run has no GPU. The reads are the page faults of the copy (with the kernel's read-ahead)."""

    def __init__(self, data, block_size: int, gpu: int | None, resources):
        super().__init__(data, block_size)
        self.gpu = gpu
        self._map: tuple[int, int] | None = None
        if gpu is not None:
            from xferscope.engines import gpu_setup

            self.cu = gpu_setup.driver()
            self.check = gpu_setup.check
            resources.context(gpu)

    def opened(self, file: int) -> None:
        from xferscope.engines.page_cache import _MAP_FAILED, _libc

        size = self.data.files[file].size
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, self._fd, 0)
        if addr in (None, _MAP_FAILED):
            raise RunFailed(f"cannot map {self.data.files[file].path}: errno {ctypes.get_errno()}")
        self._map = (addr, size)

    def close_file(self) -> None:
        if self._map is not None:
            from xferscope.engines.page_cache import _libc

            _libc.munmap(ctypes.c_void_p(self._map[0]), self._map[1])
            self._map = None
        super().close_file()

    def read(self, sample: SampleRef, slot: Slot, at: int) -> None:
        self.fd_for(sample.file)
        assert self._map is not None
        if sample.offset + sample.length > self._map[1]:
            raise self._short(sample, max(0, self._map[1] - sample.offset), sample.length)
        src = self._map[0] + sample.offset
        if slot.dev is not None:
            self.check(self.cu.cuMemcpyHtoD(slot.dev + at, src, sample.length), "cuMemcpyHtoD")
        else:
            assert slot.host is not None
            slot.host[at : at + sample.length] = memoryview((ctypes.c_char * sample.length).from_address(src)).cast("B")
