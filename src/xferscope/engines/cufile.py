"""cufile: storage -> GPU memory through cuFile (GPUDirect Storage), driven by cuda-python.

``cufile`` (gdsio GPUD, ``-x 0``): every worker opens the file with O_DIRECT,
registers its own handle (``handle_register``) and its own GPU buffer
(``buf_register``) outside the timed region; the native core then calls
cuFileRead/cuFileWrite, from the library the bindings loaded, with the GIL
nowhere near.

``cufile-batch`` (gdsio GPU_BATCH, ``-x 6``): ``batch_io_set_up/submit/get_status``
with --iodepth operations per batch (queue depth = batch size).
``cufile-async`` (gdsio GPU_DIRECT_ASYNC, ``-x 5``): ``read_async/write_async`` on a
registered stream, --iodepth operations in flight. These two run in Python
threads calling the bindings (which release the GIL while cuFile works) and
count with ``Recorder`` in the native core's histogram buckets.

Every run says which mode cuFile ran in: true GDS or compat mode (POSIX
underneath), in ``labels`` and ``environment()["cufile_mode"]``, and whether its
I/O went through the page cache in spite of O_DIRECT (one probe per run: cuFile's
compat batch path does), in ``labels`` and ``environment()["io_mode"]``.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import os
import time
from typing import Any

from xferscope import _iocore
from xferscope.engines import cufile_driver, cufile_probe, gpu_setup, page_cache
from xferscope.engines.gpu_native import GpuNativeEngine, gpu_environment
from xferscope.engines.native import GpuWorker, open_worker_files
from xferscope.engines.threaded import ThreadEngine, ThreadWorker
from xferscope.errors import RunFailed, SpecError
from xferscope.records import EngineEnvironment

# cuFileStreamRegister flags: the size, file offset and buffer offset of each
# operation are fixed once submitted, and page aligned.
STREAM_FIXED = 0x1 | 0x2 | 0x4
STREAM_PAGE_ALIGNED = 0x8
#: a batch with no completion for this long is stuck (seen in compat mode with 8 workers x 16): fail, don't hang
BATCH_STALL_S = 30.0
#: once the run is asked to stop, wait this long for a batch in flight before cancelling it
BATCH_STOP_GRACE_S = 5.0


def _reject_buffered(spec) -> None:
    if spec.buffered:
        raise SpecError(
            "buffered",
            f"{spec.path} reads with O_DIRECT into GPU memory; --buffered applies to "
            "host and bounce (gdsio -x 4 is `--path bounce --buffered`)",
        )


class CufileMixin:
    """What the three cuFile paths share: availability, the driver, the mode probe and labels."""

    spec: Any
    labels: list[str]
    worker_gpus: list[int]
    target: Any
    resources: gpu_setup.GpuResources
    mode: cufile_driver.CufileMode | None = None
    #: per direction ("read", "write"): did one probe I/O land in the page cache (None: cannot tell)
    page_cache_seen: dict[str, bool | None] | None = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return cufile_driver.unavailable_reason()

    def open_cufile(self) -> None:
        _reject_buffered(self.spec)
        cufile_driver.open_driver(self.worker_gpus[0])

    def register(self, index: int, gpu: int, fd: int, dev: int, size: int) -> int:
        target = self.target
        path = target.files[target.worker_files[index]].path
        handle = cufile_driver.register_handle(self.resources, fd, path, target.filesystem.fstype)
        if self.spec.register_buffers:
            cufile_driver.register_buffer(self.resources, gpu, dev, size)
        elif "GPU buffers not registered" not in self.labels:
            self.labels.append("GPU buffers not registered")
        return handle

    def detect_mode(self) -> None:
        """Label the run with the mode cuFile serves this file in (one probe read, untimed, in a process
        of its own)."""
        target = self.target
        path = target.files[target.worker_files[0]].path
        self.mode = cufile_probe.file_mode(
            path,
            self.spec.block_size,
            self.worker_gpus[0],
            os.stat(path).st_dev,
            fstype=target.filesystem.fstype,
            register=self.spec.register_buffers,
        )
        self.labels.append(self.mode.label)

    def _one_io(self, worker: Any, offset: int, write: bool) -> None:
        """One block through this path's own call, waited for (the untimed probe)."""
        raise NotImplementedError

    def check_page_cache(self, worker: GpuWorker | ThreadWorker) -> None:
        """Does this path really bypass the page cache? One untimed probe I/O per direction the run
        uses, through ``worker`` (the first) on its first block; where the pages land in the cache,
        the run is labelled as going through it, not as O_DIRECT."""
        target, spec = self.target, self.spec
        path = target.files[target.worker_files[0]].path
        offset = target.worker_regions[0][0]
        directions = ([("read", False)] if spec.read_pct > 0 else []) + ([("write", True)] if spec.writes else [])
        self.page_cache_seen = {
            name: page_cache.passes_through(
                path, offset, spec.block_size, functools.partial(self._one_io, worker, offset, write)
            )
            for name, write in directions
        }
        cached = [name for name, seen in self.page_cache_seen.items() if seen]
        if cached:
            if "O_DIRECT" in self.labels:
                self.labels.remove("O_DIRECT")
            self.labels.insert(
                0,
                f"page cache: cuFile's {' and '.join(cached)}s went through it in spite of "
                "O_DIRECT (seen by a probe), so the figures include cache hits",
            )

    def cufile_environment(self) -> EngineEnvironment:
        env: EngineEnvironment = {
            "cufile_version": cufile_driver.library_version(),
            "cufile_library": cufile_driver.library_path(),
        }
        if self.mode is not None:
            env["cufile_mode"] = self.mode.mode
            env["cufile_mode_reason"] = self.mode.reason
        if self.page_cache_seen is not None:
            env["page_cache_probe"] = dict(self.page_cache_seen)
            if any(self.page_cache_seen.values()):
                env["io_mode"], env["direct_io"] = "buffered", False
        return env


class CufileEngine(CufileMixin, GpuNativeEngine):  # type: ignore[misc]  # every worker has a GPU here
    name = "cufile"
    xfer_type = "GPUD"
    description = "storage -> GPU memory through cuFile (gdsio GPUD)"
    native_mode = _iocore.MODE_CUFILE

    def prepare_gpu(self):
        self.open_cufile()
        if self.spec.iodepth > 1:
            self.labels.append(
                f"queue depth {self.spec.iodepth} not used (cuFileRead is synchronous; "
                "cufile-batch and cufile-async queue)"
            )
        gpu = super().prepare_gpu()
        gpu.functions.update(cufile_driver.functions())
        first = self.gpu_workers[0]
        self.detect_mode()
        self.check_page_cache(first)
        return gpu

    def _one_io(self, worker, offset: int, write: bool) -> None:
        cf, bs = cufile_driver.module(), self.spec.block_size
        done = (cf.write if write else cf.read)(worker.handle, worker.dev, bs, offset, 0)
        if done != bs:
            raise RunFailed(f"cuFile {'write' if write else 'read'} at offset {offset} returned {done} of {bs} bytes")

    def prepare_worker(self, index, gpu, worker):
        worker.handle = self.register(index, gpu, self._fds[index], worker.dev, self.spec.block_size)

    def environment(self):
        env = super().environment()
        env.update(self.cufile_environment())
        return env


# ------------------------------------------------------------------ Python-thread engines


class _CufileThreadEngine(CufileMixin, ThreadEngine):  # type: ignore[misc]  # every worker has a GPU here
    """cufile-batch and cufile-async: Python threads calling cuda.bindings.cufile, each worker its own O_DIRECT
    descriptor and registered handle."""

    def __init__(self, spec, target):
        super().__init__(spec, target)
        self._fds: list[int] = []

    def open_path(self) -> None:
        self.open_cufile()
        open_worker_files(self.spec, self.target, self._fds)  # one O_DIRECT descriptor per worker
        self.labels.append("O_DIRECT")

    def open_worker(self, index: int, gpu: int, dev: int, size: int) -> int:
        return self.register(index, gpu, self._fds[index], dev, size)

    def first_worker_opened(self) -> None:
        self.detect_mode()

    def close_path(self) -> None:
        while self._fds:
            with contextlib.suppress(OSError):
                os.close(self._fds.pop())

    def environment(self) -> EngineEnvironment:
        env: EngineEnvironment = {"io_engine": self.name, "direct_io": True, "queue_depth": self.depth}
        env.update(gpu_environment(self.worker_gpus))
        env.update(self.cufile_environment())
        return env


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class CufileBatchEngine(_CufileThreadEngine):
    name = "cufile-batch"
    xfer_type = "GPU_BATCH"
    description = "storage -> GPU memory through cuFile's batch API, queue depth = batch size (gdsio GPU_BATCH)"

    def prepare(self) -> None:
        limit = None
        if self.depth > 1:
            cufile_driver.open_driver(self.worker_gpus[0])
            limit = cufile_driver.max_batch_size()
        if limit and self.depth > limit:
            raise SpecError(
                "iodepth",
                f"cuFile takes batches of at most {limit} operations "
                "(cufile.json properties.io_batchsize); lower --iodepth",
            )
        super().prepare()
        self.labels.append(f"batch API, batch size {self.depth}")
        self.check_page_cache(self._workers[0])

    def _one_io(self, worker, offset: int, write: bool) -> None:
        """One operation through the worker's batch handle, waited for (untimed probes)."""
        cf, bs = cufile_driver.module(), self.spec.block_size
        params, events = worker.params, worker.batch_events
        params["u"]["batch"]["file_offset"][0] = offset
        params["opcode"][0] = int(cf.Opcode.WRITE if write else cf.Opcode.READ)
        cf.batch_io_submit(worker.batch, 1, params.ctypes.data, 0)
        nr, timeout, t0 = ctypes.c_uint(0), _Timespec(1, 0), time.monotonic()
        while not nr.value:
            nr.value = 1
            cf.batch_io_get_status(worker.batch, 1, ctypes.addressof(nr), events.ctypes.data, ctypes.addressof(timeout))
            if not nr.value and time.monotonic() - t0 > BATCH_STALL_S:
                cf.batch_io_cancel(worker.batch)
                raise RunFailed(f"cuFile batch probe at offset {offset} did not complete in {BATCH_STALL_S:.0f} s")
        status, ret = int(events["status"][0]), int(events["ret"][0])
        if status != int(cf.Status.COMPLETE) or ret != bs:
            raise RunFailed(
                f"cuFile batch {'write' if write else 'read'} at offset {offset} ended with status "
                f"{cf.Status(status).name}, {ret} of {bs} bytes"
            )

    def prepare_worker(self, worker):
        import numpy as np

        cf = cufile_driver.module()
        n, bs = self.depth, self.spec.block_size
        with gpu_setup.interrupts_deferred():
            batch = int(cf.batch_io_set_up(n))
            self.resources.on_release(worker.gpu, "cuFileBatchIODestroy", lambda: cf.batch_io_destroy(batch))
        params = np.zeros(n, dtype=cf.io_params_dtype)
        params["mode"] = int(cf.BatchMode.BATCH)
        params["fh"] = worker.handle
        params["cookie"] = np.arange(n)
        io = params["u"]["batch"]
        io["dev_ptr_base"] = worker.dev
        io["dev_ptr_offset"] = np.arange(n) * bs
        io["size_"] = bs
        worker.batch, worker.params, worker.batch_events = batch, params, np.zeros(n, dtype=cf.io_events_dtype)

    def run_worker(self, index, worker):
        try:
            self._batches(index, worker)
        except BaseException:
            try:  # nothing may still land in GPU memory once the buffers are freed
                cufile_driver.module().batch_io_cancel(worker.batch)
            except Exception:
                pass
            raise

    def _batches(self, index, worker):
        import numpy as np

        cf = cufile_driver.module()
        bs, depth = self.spec.block_size, self.depth
        read_op, write_op, complete = int(cf.Opcode.READ), int(cf.Opcode.WRITE), int(cf.Status.COMPLETE)
        params, events, cursor = worker.params, worker.batch_events, worker.cursor
        offsets = params["u"]["batch"]["file_offset"]
        opcodes = params["opcode"]
        nr = ctypes.c_uint(0)
        timeout = _Timespec(1, 0)
        done = 0
        while self.keep_going(done):
            n = depth
            if self._bytes_limit:
                n = min(n, -(-(self._bytes_limit - done) // bs))
            writes = np.zeros(n, dtype=bool)
            for j in range(n):
                offsets[j], writes[j] = cursor.next()
            opcodes[:n] = np.where(writes, write_op, read_op)
            t0 = time.monotonic_ns()
            cf.batch_io_submit(worker.batch, n, params.ctypes.data, 0)
            remaining, progress = n, time.monotonic()
            while remaining:
                nr.value = remaining
                cf.batch_io_get_status(
                    worker.batch, 1, ctypes.addressof(nr), events.ctypes.data, ctypes.addressof(timeout)
                )
                k = nr.value
                if not k:
                    self.check_stall(time.monotonic() - progress, remaining, n)
                    continue
                progress = time.monotonic()
                lat = time.monotonic_ns() - t0
                ev = events[:k]
                cookies = ev["cookie"].astype(np.int64)
                bad = (ev["status"] != complete) | (ev["ret"] != bs)
                if bad.any():
                    j = int(cookies[np.argmax(bad)])
                    status, ret = int(ev["status"][np.argmax(bad)]), int(ev["ret"][np.argmax(bad)])
                    raise RunFailed(
                        f"batch {'write' if writes[j] else 'read'} at offset {int(offsets[j])} ended "
                        f"with status {cf.Status(status).name}, {ret} of {bs} bytes"
                    )
                nw = int(writes[cookies].sum())
                self.recorder.record(index, True, bs, lat, nw)
                self.recorder.record(index, False, bs, lat, k - nw)
                remaining -= k
                done += k * bs

    def check_stall(self, idle_s: float, pending: int, batch: int) -> None:
        """Give up on a batch that completes nothing (run_worker then cancels it), instead of hanging."""
        limit = BATCH_STOP_GRACE_S if self._stop.is_set() else BATCH_STALL_S
        if idle_s < limit:
            return
        in_flight = self.spec.workers * batch
        raise RunFailed(
            f"cuFile batch stalled: {pending} of {batch} operations still pending after {idle_s:.1f} s "
            f"({self.spec.workers} workers x batch size {batch} = {in_flight} in flight); "
            "lower --workers or --iodepth"
        )


class CufileAsyncEngine(_CufileThreadEngine):
    name = "cufile-async"
    xfer_type = "GPU_DIRECT_ASYNC"
    description = "storage -> GPU memory through cuFile's stream API (gdsio GPU_DIRECT_ASYNC)"

    def prepare(self) -> None:
        super().prepare()
        self.labels.append(f"stream API (read_async/write_async), {self.depth} in flight per worker")
        self.check_page_cache(self._workers[0])

    def _one_io(self, worker, offset: int, write: bool) -> None:
        """One operation on the worker's stream, waited for (untimed probes)."""
        cu, cf, bs = gpu_setup.driver(), cufile_driver.module(), self.spec.block_size
        worker.file_off[0], worker.done[0] = offset, 0
        call = cf.write_async if write else cf.read_async
        call(
            worker.handle,
            worker.dev,
            ctypes.addressof(worker.size),
            ctypes.addressof(worker.file_off),
            ctypes.addressof(worker.buf_off),
            ctypes.addressof(worker.done),
            int(worker.stream),
        )
        gpu_setup.check(cu.cuStreamSynchronize(worker.stream), "cuStreamSynchronize")
        if worker.done[0] != bs:
            raise RunFailed(
                f"{'write' if write else 'read'}_async at offset {offset} returned {worker.done[0]} (expected {bs})"
            )

    def prepare_worker(self, worker):
        res, gpu, n = self.resources, worker.gpu, self.depth
        stream = res.stream(gpu)
        flags = STREAM_FIXED | (STREAM_PAGE_ALIGNED if self.spec.block_size % 4096 == 0 else 0)
        cufile_driver.register_stream(res, gpu, stream, flags)
        size = (ctypes.c_size_t * n)(*([self.spec.block_size] * n))
        file_off = (ctypes.c_int64 * n)()
        buf_off = (ctypes.c_int64 * n)(*[j * self.spec.block_size for j in range(n)])
        done = (ctypes.c_ssize_t * n)()
        # waits last as long as a whole read: sleep in them, so the CPU figures show cuFile's cost, not a spin
        events = [res.event(gpu, blocking=True) for _ in range(n)]
        worker.stream, worker.stream_events = stream, events
        worker.size, worker.file_off, worker.buf_off, worker.done = size, file_off, buf_off, done

    def run_worker(self, index, worker):
        cu, cf = gpu_setup.driver(), cufile_driver.module()
        bs = self.spec.block_size
        stream, events, cursor = worker.stream, worker.stream_events, worker.cursor
        handle, dev, sid = worker.handle, worker.dev, int(worker.stream)
        size, file_off, buf_off, done_b = worker.size, worker.file_off, worker.buf_off, worker.done
        step = ctypes.sizeof(ctypes.c_int64)
        addr = {
            name: ctypes.addressof(arr)
            for name, arr in (("size", size), ("file", file_off), ("buf", buf_off), ("done", done_b))
        }
        free = collections.deque(range(self.depth))
        inflight: collections.deque = collections.deque()
        submitted = 0
        while True:
            if free and self.keep_going(submitted):
                j = free.popleft()
                off, write = cursor.next()
                file_off[j] = off
                done_b[j] = 0
                call = cf.write_async if write else cf.read_async
                t0 = time.monotonic_ns()
                call(
                    handle,
                    dev,
                    addr["size"] + j * step,
                    addr["file"] + j * step,
                    addr["buf"] + j * step,
                    addr["done"] + j * step,
                    sid,
                )
                gpu_setup.check(cu.cuEventRecord(events[j], stream), "cuEventRecord")
                inflight.append((j, write, off, t0))
                submitted += bs
                continue
            if not inflight:
                break
            j, write, off, t0 = inflight.popleft()
            gpu_setup.check(cu.cuEventSynchronize(events[j]), "cuEventSynchronize")
            lat = time.monotonic_ns() - t0
            if done_b[j] != bs:
                self._stop.set()
                raise RunFailed(
                    f"{'write' if write else 'read'}_async at offset {off} returned {done_b[j]} (expected {bs})"
                )
            self.recorder.record(index, write, bs, lat)
            free.append(j)
