"""The GPU paths on a machine without a GPU: their engines with host stand-ins for CUDA.

``xferscope._gpusim`` provides functions with the signatures of the CUDA driver and cuFile
calls that the native core makes (cuMemcpyHtoDAsync, cuEventQuery, cuFileRead, ...), working
on host memory. ``sim_gpu`` (a fixture, see conftest) puts them behind the bounce engines:
``GpuNativeEngine.functions`` returns the stand-ins' addresses and ``SimResources`` takes the
place of ``gpu_setup.GpuResources``, so the engines' own set-up and the real native loop run,
with "device memory" that is host memory. What this can check: the scheduling of the loop
(which interval overlaps which, how many buffers are in flight) and the data it moves
(``--verify`` compares what reached the "GPU"). What it cannot: anything about a real GPU.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

from xferscope import _gpusim, _iocore
from xferscope import target as targets
from xferscope.engines import gpu_setup
from xferscope.engines.registry import engine_class
from xferscope.spec import RunSpec


class SimResources:
    """``gpu_setup.GpuResources`` for the stand-ins: the same calls, host memory behind them."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self._maps: list[tuple[int, int]] = []

    def context(self, gpu: int) -> int:
        return 1

    def context_handle(self, gpu: int) -> int:
        return 1

    def functions(self) -> dict[str, int]:
        return _gpusim.functions()

    def device_memory(self, gpu: int, size: int) -> int:
        return _gpusim.alloc(size)

    def pinned_memory(self, gpu: int, size: int) -> int:
        return _gpusim.alloc(size)

    def pinned_huge_memory(self, gpu: int, size: int) -> int:
        raw, length, base = gpu_setup.map_huge_pages(size)
        self._maps.append((raw, length))
        return base

    def stream(self, gpu: int) -> int:
        return _gpusim.stream()

    def event(self, gpu: int, timing: bool = False, blocking: bool = False) -> int:
        return _gpusim.event(blocking=blocking)

    def fill_device(self, gpu: int, ptr: int, size: int, seed: int) -> None:
        _iocore.fill_pattern(memoryview((ctypes.c_char * size).from_address(ptr)).cast("B"), 0, seed)

    def copy(self, gpu: int, dst: int, src: int, n: int, kind: str) -> None:
        assert kind in ("dtoh", "htod", "dtod")
        ctypes.memmove(dst, src, n)

    @property
    def live(self) -> int:
        return len(self._maps)

    def release(self) -> None:
        while self._maps:
            gpu_setup.unmap(*self._maps.pop())


@dataclass
class Copy:
    kind: str  # "htod" or "dtoh"
    stream: int
    dst: int
    src: int
    bytes: int
    issued: int  # ns, CLOCK_MONOTONIC
    landed: int


@dataclass
class Interval:
    kind: int  # _iocore.TL_*
    lane: int
    buf: int
    t0: int
    t1: int
    off: int
    bytes: int


@dataclass
class EngineRun:
    """What one run of an engine on the stand-ins left behind."""

    timelines: list[list[Interval]]  # per worker
    host_buffers: list[list[int]]  # per worker, the addresses of its pinned buffers
    copies: list[Copy]
    cufile_calls: list[tuple]
    error: tuple[str, int] | None
    bytes: int
    labels: list[str]
    worker_cpu_s: list[float]  # per worker thread: its CPU time in the timed region (user + system)
    worker_done_s: list[float]  # per worker: when it finished, from the start of the timed region
    environment: dict  # what the engine reports of itself (pinned buffers, io engine, ...)

    def reads(self, worker: int = 0) -> list[Interval]:
        return [r for r in self.timelines[worker] if r.kind == _iocore.TL_READ]

    def copies_from(self, worker: int = 0) -> list[Copy]:
        """The worker's copies to the GPU, in the order they were issued, with ``buf`` = the buffer index."""
        index = {addr: i for i, addr in enumerate(self.host_buffers[worker])}
        out = [c for c in self.copies if c.kind == "htod" and c.src in index]
        out.sort(key=lambda c: c.issued)
        for c in out:
            c.buf = index[c.src]  # type: ignore[attr-defined]
        return out


def run_engine(spec: RunSpec, *, timeline: int = 1 << 16) -> EngineRun:
    """Prepare, run to the end and close ``spec``'s engine (stand-ins in place), keeping its timeline."""
    target = targets.plan(spec.validate())
    targets.materialize(target, threading.Event(), None)
    engine = engine_class(spec.path)(spec, target)
    engine.timeline_records = timeline
    try:
        snap = engine.run_to_end()
        raw = engine.timeline()
        engine.after_run()
        hosts = [list(w.host) for w in getattr(engine, "gpu_workers", [])]
        labels = list(engine.labels)
        environment = engine.environment()
    finally:
        engine.close()
        targets.cleanup(target, keep=spec.keep)
    log = _gpusim.log()
    copies = [Copy(*rec) for rec in log if rec[0] in ("htod", "dtoh")]
    calls = [rec for rec in log if rec[0].startswith("cufile")]
    return EngineRun(
        [[Interval(*r) for r in w["records"]] for w in raw],
        hosts,
        copies,
        calls,
        snap.error,
        snap.bytes,
        labels,
        [(w.cpu_usr_us + w.cpu_sys_us) / 1e6 for w in snap.workers],
        [(w.done_ns or 0) / 1e9 for w in snap.workers],
        environment,
    )
