"""kvikio: storage -> GPU memory through KvikIO, the cuFile library most people use from Python, in an engine
process of its own like every path (a crash in KvikIO takes down that process, not the console).

Outside the timed region, each worker opens the file with ``kvikio.CuFile`` (KvikIO opens it twice, once with
O_DIRECT, and registers the handle with cuFile) and gets its device blocks (cuMemAlloc, as cufile's), registered
with cuFile through ``kvikio.buffer.memory_register`` as cufile registers its own (``--no-register`` leaves them
unregistered). KvikIO's settings, stated on every run:

* its thread pool: workers x queue depth threads, so every block in flight has a thread of its own;
* its task size: the block size, so each pread is one task, one cuFile call;
* its compat mode OFF: it reads through cuFile, as the cufile path does (its AUTO mode may choose its own POSIX
  reads instead), and cuFile's own mode (GDS or compat) is probed and said as for cufile;
* its GDS threshold 0: every block goes to cuFile, none to POSIX for being small.

In the timed region each worker keeps --iodepth preads of one block in flight,
``CuFile.pread(block, size, offset, task_size)``, and waits on each future in turn (``IOFuture.get`` releases the
GIL). Samples are live: a block is counted when its future completes, with its latency from the call to then.
"""

from __future__ import annotations

import collections
import contextlib
import time
from typing import Any

from xferscope.engines import cufile_driver
from xferscope.engines.cufile import CufileMixin
from xferscope.engines.gpu_native import gpu_environment
from xferscope.engines.threaded import ThreadEngine, ThreadWorker
from xferscope.errors import EnvironmentProblem, RunFailed
from xferscope.packages import KVIKIO, installed_version, package_refusal
from xferscope.records import EngineEnvironment

#: how the samples are taken, said on every run
SAMPLES = "live: each block counted as its pread's future completes, timed from the call"


class DeviceBlocks:
    """``size`` bytes of GPU memory at ``address``, as KvikIO takes a buffer (the CUDA array interface)."""

    def __init__(self, address: int, size: int):
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (address, False),
            "strides": None,
            "version": 3,
        }


def _name(value: Any) -> str:
    """A KvikIO enum's name (``CompatMode.OFF`` is an IntEnum: its str is "0")."""
    return str(getattr(value, "name", value))


class KvikioEngine(CufileMixin, ThreadEngine):  # type: ignore[misc]  # every worker has a GPU here
    name = "kvikio"
    xfer_type = "KVIKIO"
    description = "storage -> GPU memory through KvikIO's CuFile.pread (cuFile underneath)"

    def __init__(self, spec, target):
        super().__init__(spec, target)
        self.kvikio: Any = None
        self.settings: dict[str, str] = {}

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return package_refusal(KVIKIO, KVIKIO.path) or cufile_driver.unavailable_reason()

    @property
    def threads(self) -> int:
        return self.spec.workers * self.depth

    def open_path(self) -> None:
        cufile_driver.log()  # before KvikIO loads libcufile: its log goes where a failure is explained from
        import kvikio
        import kvikio.buffer
        import kvikio.defaults

        self.kvikio = kvikio
        bs = self.spec.block_size
        kvikio.defaults.set(
            {"compat_mode": kvikio.CompatMode.OFF, "num_threads": self.threads, "task_size": bs, "gds_threshold": 0}
        )
        self.settings = {
            "version": installed_version(KVIKIO.package, *KVIKIO.also) or str(kvikio.__version__),
            "threads": str(kvikio.defaults.get("num_threads")),
            "task_size": str(kvikio.defaults.get("task_size")),
            "compat_mode": _name(kvikio.defaults.get("compat_mode")),
            "gds_threshold": str(kvikio.defaults.get("gds_threshold")),
            "samples": SAMPLES,
        }
        self.labels.append(
            f"KvikIO {self.settings['version']}: {self.settings['threads']} threads, task size {bs}, "
            f"compat mode {self.settings['compat_mode']} (through cuFile)"
        )
        self.labels.append(f"samples {SAMPLES}")
        self.labels.append("O_DIRECT")  # KvikIO hands cuFile the descriptor it opened with O_DIRECT (probed below)

    def open_worker(self, index: int, gpu: int, dev: int, size: int) -> Any:
        target = self.target
        path = target.files[target.worker_files[index]].path
        mark = cufile_driver.log().mark()
        try:
            handle = self.kvikio.CuFile(path, "r+" if self.spec.writes else "r")
        except Exception as exc:  # cuFile refused the file (no udev record in a VM, a filesystem without O_DIRECT)
            why = cufile_driver.explain_registration(
                exc, cufile_driver.log().since(mark), path, target.filesystem.fstype
            )
            raise EnvironmentProblem(f"KvikIO: {why}; KvikIO said: {exc}") from None
        self.resources.on_release(None, "KvikIO CuFile.close", handle.close)
        if self.spec.register_buffers:
            whole = DeviceBlocks(dev, size)
            self.kvikio.buffer.memory_register(whole)
            self.resources.on_release(
                gpu, "KvikIO memory_deregister", lambda: self.kvikio.buffer.memory_deregister(whole)
            )
        elif "GPU buffers not registered" not in self.labels:
            self.labels.append("GPU buffers not registered")
        return handle

    def prepare_worker(self, worker: ThreadWorker) -> None:
        bs = self.spec.block_size
        worker.buffer = [DeviceBlocks(worker.dev + j * bs, bs) for j in range(self.depth)]

    def first_worker_opened(self) -> None:
        self.detect_mode()

    def prepare(self) -> None:
        super().prepare()
        self.check_page_cache(self._workers[0])

    def _one_io(self, worker, offset: int, write: bool) -> None:
        bs, handle = self.spec.block_size, worker.handle
        done = (handle.pwrite if write else handle.pread)(worker.buffer[0], bs, offset, bs).get()
        if done != bs:
            raise RunFailed(f"KvikIO {'pwrite' if write else 'pread'} at offset {offset} returned {done} of {bs} bytes")

    def run_worker(self, index: int, worker: ThreadWorker) -> None:
        bs, handle, cursor, blocks = self.spec.block_size, worker.handle, worker.cursor, worker.buffer
        free = collections.deque(range(self.depth))
        inflight: collections.deque = collections.deque()
        submitted = 0
        try:
            while True:
                if free and self.keep_going(submitted):
                    j = free.popleft()
                    off, write = cursor.next()
                    t0 = time.monotonic_ns()
                    future = (handle.pwrite if write else handle.pread)(blocks[j], bs, off, bs)
                    inflight.append((j, write, off, t0, future))
                    submitted += bs
                    continue
                if not inflight:
                    break
                j, write, off, t0, future = inflight.popleft()
                done = future.get()
                lat = time.monotonic_ns() - t0
                if done != bs:
                    self._stop.set()
                    raise RunFailed(
                        f"KvikIO {'pwrite' if write else 'pread'} at offset {off} returned {done} of {bs} bytes"
                    )
                self.recorder.record(index, write, bs, lat)
                free.append(j)
        finally:  # nothing may still land in GPU memory once the blocks are freed
            for *_, future in inflight:
                with contextlib.suppress(Exception):
                    future.get()

    def environment(self) -> EngineEnvironment:
        env: EngineEnvironment = {"io_engine": "kvikio", "direct_io": True, "queue_depth": self.depth}
        env.update(gpu_environment(self.worker_gpus))
        env.update(self.cufile_environment())
        if self.settings:
            env["kvikio"] = dict(self.settings)
        return env
