"""Engines whose hot loop is the native core (``xferscope._iocore``): host, bounce, cufile.

This base opens one file descriptor per worker (O_DIRECT unless buffered),
builds the native Job and forwards the protocol calls to it. Subclasses add
what their path needs (GPU buffers, cuFile handles) in ``prepare_gpu`` and say
which native mode to run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypedDict

from xferscope.engines.base import Engine, Snapshot
from xferscope.engines.split import lanes, split_label
from xferscope.errors import EnvironmentProblem, RunFailed
from xferscope.records import EngineEnvironment
from xferscope.spec import RunSpec

if TYPE_CHECKING:
    from xferscope.target import Target


def uring_status() -> tuple[bool, str]:
    """(works, reason) for io_uring on this kernel."""
    from xferscope import _iocore

    err = _iocore.uring_probe()
    if err == 0:
        return True, ""
    return False, os.strerror(err)


def open_worker_files(spec: RunSpec, target: Target, fds: list[int]) -> None:
    """One descriptor per worker on its file (O_DIRECT where the target is), appended to ``fds`` as they open."""
    flags = os.O_RDWR if spec.writes else os.O_RDONLY
    if target.direct:
        flags |= os.O_DIRECT
    for i in range(spec.workers):
        path = target.files[target.worker_files[i]].path
        try:
            fds.append(os.open(path, flags))
        except OSError as exc:
            raise EnvironmentProblem(f"cannot open {path}: {exc.strerror}") from None


@dataclass
class GpuWorker:
    """One worker's GPU side, as the native core reads it (by attribute): the context it calls CUDA in, its stream
    and device blocks; pinned host buffers and an event for each (the bounce paths); a cuFile handle (cufile)."""

    ctx: int
    stream: int
    dev: int
    host: list[int] = field(default_factory=list)
    events: list[int] = field(default_factory=list)
    handle: int = 0


class GpuJob(NamedTuple):
    """What a GPU path gives the native Job: the CUDA (and cuFile) entry points' addresses, and each worker."""

    functions: dict[str, int]
    workers: list[GpuWorker]


class NativeOptions(TypedDict, total=False):
    """The native Job's keyword arguments a path sets beside the common ones."""

    turns: int  # bounce-async: how a worker's reads use the buffers (_iocore.TURNS_*)
    host_buffers: int  # host: buffers a worker reads into in turn
    host_memory: list[int]  # host: each worker's buffers in this memory of the caller's (pinned memory)


class WorkerTimeline(TypedDict):
    """One worker's recorded intervals: (kind, lane, buffer, t0_ns, t1_ns, offset, bytes) each, kinds as
    ``_iocore.TL_*``, and how many did not fit."""

    records: list[tuple[int, int, int, int, int, int, int]]
    dropped: int


class NativeEngine(Engine):
    """Shared plumbing for engines driven by ``_iocore.Job``."""

    native_mode: int = 0
    #: records per worker of the native timeline (0: none); set before prepare() to read
    #: ``timeline()`` after the run (bench/bounce_timeline.py, the scheduling tests)
    timeline_records: int = 0

    def __init__(self, spec, target):
        super().__init__(spec, target)
        self._fds: list[int] = []
        self._job = None
        self._started = False
        self._closed = False
        self.io_engine = "psync"

    # -- hooks for subclasses --------------------------------------------------
    def prepare_gpu(self) -> GpuJob | None:
        """The Job's ``gpu_functions`` and ``gpu_workers`` (GPU engines); None for the host path."""
        return None

    def release_gpu(self) -> None:
        """Free what prepare_gpu() allocated (called by close(), also after failures)."""

    def use_uring(self) -> bool:
        return False

    def huge_pages(self) -> bool:
        """Back the host buffers with transparent huge pages (the host path, with --huge-pages)."""
        return False

    def copy_batch(self) -> int:
        """Blocks per copy of bounce-async's reads (small blocks go in groups); 0: no groups (every other path)."""
        return 0

    def native_options(self) -> NativeOptions:
        """Further keyword arguments of the native Job that a path sets (bounce-async's ``turns``, say)."""
        return {}

    # -- protocol --------------------------------------------------------------
    def open_files(self) -> None:
        open_worker_files(self.spec, self.target, self._fds)

    def prepare(self) -> None:
        from xferscope import _iocore

        self.open_files()
        spec = self.spec
        if self.target.direct:
            self.labels.append("O_DIRECT")
        else:
            self.labels.append("buffered (page cache)")
        gpu = self.prepare_gpu()
        uring = self.use_uring()
        label = split_label(spec.block_size, spec.split)
        if label:
            self.labels.append(label)
        self.io_engine = "io_uring" if uring else "psync"
        duration_ns = int(spec.duration * 1e9) if spec.duration else 0
        bytes_limit = 0
        if spec.total_bytes:
            per_worker = spec.total_bytes // spec.workers
            bytes_limit = max(spec.block_size, per_worker // spec.block_size * spec.block_size)
        files = self.target.files
        try:
            self._job = _iocore.Job(
                self._fds,
                [r[0] for r in self.target.worker_regions],
                [r[1] for r in self.target.worker_regions],
                spec.block_size,
                mode=self.native_mode,
                read_pct=spec.read_pct,
                random=spec.is_random,
                iodepth=min(spec.iodepth, _iocore.MAX_SLOTS),
                duration_ns=duration_ns,
                bytes_limit=bytes_limit,
                seed=spec.seed,
                verify=spec.verify,
                pattern_seeds=[files[self.target.worker_files[i]].pattern_seed for i in range(spec.workers)],
                cpus=self.worker_cpus(),
                use_uring=uring,
                gpu_functions=gpu.functions if gpu else None,
                gpu_workers=gpu.workers if gpu else None,
                huge_pages=self.huge_pages(),
                split=spec.split or 0,
                timeline=self.timeline_records,
                copy_batch=self.copy_batch(),
                **self.native_options(),
            )
        except (ValueError, TypeError) as exc:
            raise RunFailed(f"{self.name}: cannot set up the workers: {exc}") from None

    def worker_cpus(self) -> list[int] | None:
        """CPU of each worker: the spec's list round-robin, or the NUMA node's CPUs, or None."""
        cpus = self.spec.cpus
        if cpus is None and self.spec.numa_node is not None:
            cpus = numa_cpus(self.spec.numa_node)
        if not cpus:
            return None
        return [cpus[i % len(cpus)] for i in range(self.spec.workers)]

    def start(self) -> None:
        self._job.start()
        self._started = True

    def run_to_end(self) -> Snapshot:
        """Prepare, start and wait for the whole run here, in this process (benches, doctor's probe, tests); its
        last counters. ``close()`` is the caller's, after reading what else it wants (the timeline, say)."""
        self.prepare()
        self.start()
        while not self.wait(0.5):
            pass
        return self.snapshot()

    def snapshot(self) -> Snapshot:
        return Snapshot.from_native(self._job.snapshot())

    def timeline(self) -> list[WorkerTimeline]:
        """Per worker, the intervals it recorded (``timeline_records`` > 0), after ``wait()`` and before
        ``close()``: ``{"records": [(kind, lane, buffer, t0_ns, t1_ns, offset, bytes)], "dropped": n}``,
        kinds as ``_iocore.TL_*``, times from ``time.monotonic_ns()``'s clock."""
        return self._job.timeline() if self._job is not None else []

    def thread_ids(self) -> list[int]:
        return [t for t in self._job.tids() if t] if self._job is not None else []

    def stop(self) -> None:
        if self._job is not None:
            self._job.stop()

    def wait(self, timeout: float) -> bool:
        return True if self._job is None else bool(self._job.wait(timeout))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._job is not None:
            self._job.stop()
            if self._started:  # a job never started has no workers to wait for (wait would block)
                self._job.wait(-1)
            self._job = None
        try:
            self.release_gpu()
        finally:
            for fd in self._fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._fds.clear()

    def environment(self) -> EngineEnvironment:
        env: EngineEnvironment = {"io_engine": self.io_engine, "direct_io": self.target.direct}
        if self.spec.split:
            env["split"] = self.spec.split
            env["sub_requests_in_flight_per_worker"] = lanes(self.spec.block_size, self.spec.split)
        return env


def numa_cpus(node: int) -> list[int]:
    """CPUs of a NUMA node, from sysfs."""
    from xferscope.spec import parse_int_list

    path = f"/sys/devices/system/node/node{node}/cpulist"
    try:
        with open(path) as fh:
            return parse_int_list(fh.read().strip(), "numa_node")
    except OSError:
        raise EnvironmentProblem(f"NUMA node {node} does not exist on this machine") from None
