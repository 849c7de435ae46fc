"""Memory sweeps: latency under load and peak bandwidth, measured the way Intel MLC does.

A ``MemSpec`` says what to measure; ``MemSweep(spec)`` measures it and streams one
``MemPoint`` per injection delay (or per traffic type in peak mode) as soon as it
is measured, through a blocking iterator or ``async for``; ``cancel()`` stops it
within a second. The built-in backend runs the native core ``xferscope._memcore``
(pinned threads, GIL released); the ``mlc`` backend runs Intel's binary
(``xferscope.engines.mem_mlc``). Both give the same ``MemResult``.

The family: ``mem_machine`` (what sysfs and procfs say), ``mem_spec`` (what to
measure), ``mem_plan`` (the spec on this machine), ``mem_result`` (points, results,
their files), ``mem_mlc`` (the mlc binary); this module runs sweeps and is where
the others' public names are imported from.

Nothing here knows about terminals or the console.
"""
from __future__ import annotations

import asyncio
import platform
import queue
import statistics
import threading
from typing import Any, Callable, Iterator

from xferscope.engines.mem_machine import (allowed_cpus, cpu_model, format_cpu_list, llc_bytes, parse_cpu_list,
                                           thp_coverage, thp_mode)
from xferscope.engines.mem_plan import MemPlan, buffers_per_load_thread, resolve_plan
from xferscope.engines.mem_result import (CSV_COLUMNS, IDLE, MemPoint, MemResult, csv_text, group_series,
                                          result_json, sanity_warnings)
from xferscope.engines.mem_spec import (BACKENDS, BUILTIN_TRAFFIC, DEFAULT_DELAYS, MODES, NT_TRAFFIC, MemSpec,
                                        parse_int_list)
from xferscope.errors import EnvironmentProblem


# ------------------------------------------------------- from windows to points


def point_from_windows(windows: list[tuple[int, int, int]], *, traffic: str, stride: int, delay: int | None,
                       read_bytes: int, write_bytes: int, backend: str, ns_per_iter: float | None,
                       latency: bool, bandwidth: bool) -> MemPoint | None:
    """Median latency (and its min/max) and median bandwidth over complete sub-windows."""
    lat = [ns / steps for ns, steps, _ in windows if steps > 0 and ns > 0] if latency else []
    step_bytes = read_bytes + write_bytes
    bw = [loads * step_bytes / ns * 1e3 for ns, _, loads in windows if ns > 0] if bandwidth else []
    if (latency and not lat) or (bandwidth and not bw) or not windows:
        return None
    total = statistics.median(bw) if bw else None
    read = total * read_bytes / step_bytes if total is not None and step_bytes else None
    write = total * write_bytes / step_bytes if total is not None and step_bytes else None
    return MemPoint(
        delay=delay,
        latency_ns=statistics.median(lat) if lat else None,
        latency_min_ns=min(lat) if lat else None,
        latency_max_ns=max(lat) if lat else None,
        bandwidth_mb_s=total,
        read_mb_s=read,
        write_mb_s=write,
        traffic=traffic,
        stride=stride,
        backend=backend,
        ns_per_delay_iter=ns_per_iter,
        windows=len(windows),
    )


# ------------------------------------------------------------- the sweep


class MemSweep:
    """One sweep. Iterate it (``for p in sweep`` or ``async for p in sweep``) to run it; ``result`` after.

    The work runs in a thread of its own, so the consumer (the CLI's main thread,
    or an asyncio loop) stays responsive: Ctrl-C reaches Python at once, and
    ``cancel()`` makes the sweep stop within a second. The points already
    measured stay in ``result`` with ``cancelled`` set.
    """

    def __init__(self, spec: MemSpec):
        self.spec = spec.validated()
        self.result = MemResult(backend=self.spec.backend, spec=self.spec)
        self._cancel = threading.Event()
        self._stoppers: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._used = False
        if self.spec.backend == "mlc":
            from xferscope.engines.mem_mlc import find_mlc

            self._mlc_path = find_mlc(self.spec.mlc_path)
        else:
            self._memcore = _load_memcore()
            self._plan = resolve_plan(self.spec)

    # -- control

    def cancel(self) -> None:
        self._cancel.set()
        with self._lock:
            stoppers = list(self._stoppers)
        for stop in stoppers:
            stop()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def _on_cancel(self, stop: Callable[[], None]) -> Callable[[], None]:
        with self._lock:
            self._stoppers.append(stop)
        if self._cancel.is_set():
            stop()

        def forget() -> None:
            with self._lock:
                if stop in self._stoppers:
                    self._stoppers.remove(stop)

        return forget

    # -- consumers

    def __iter__(self) -> Iterator[MemPoint]:
        inbox: queue.Queue = queue.Queue()
        worker = self._start(inbox.put)
        try:
            while True:
                try:
                    item = _unwrap(inbox.get(timeout=0.1))
                except queue.Empty:
                    continue
                if item is _DONE:
                    return
                yield item
        finally:
            if worker.is_alive():
                self.cancel()
            worker.join()

    async def __aiter__(self):
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue = asyncio.Queue()

        def post(message: tuple[str, Any]) -> None:
            try:
                loop.call_soon_threadsafe(inbox.put_nowait, message)
            except RuntimeError:  # the loop has closed: nobody is listening any more
                self.cancel()

        worker = self._start(post)
        try:
            while True:
                item = _unwrap(await inbox.get())
                if item is _DONE:
                    return
                yield item
        finally:
            if worker.is_alive():
                self.cancel()
                await asyncio.to_thread(worker.join)

    def run(self, on_point: Callable[[MemPoint], None] | None = None) -> MemResult:
        """Measure everything (blocking); call ``on_point`` for each point as it comes."""
        for point in self:
            if on_point:
                on_point(point)
        return self.result

    # -- the work

    def _start(self, post: Callable[[tuple[str, Any]], None]) -> threading.Thread:
        if self._used:
            raise RuntimeError("a MemSweep runs once; make a new one")
        self._used = True

        def work() -> None:
            try:
                produce = self._produce_mlc if self.spec.backend == "mlc" else self._produce_builtin
                for point in produce():
                    self.result.points.append(point)
                    post(("point", point))
                self._finish()
                post(("done", None))
            except BaseException as exc:  # handed to the consumer's thread, raised there
                self._finish()
                post(("error", exc))

        thread = threading.Thread(target=work, name="xferscope-mem", daemon=True)
        thread.start()
        return thread

    def _finish(self) -> None:
        self.result.cancelled = self._cancel.is_set()
        self.result.warnings.extend(w for w in sanity_warnings(self.result.points) if w not in self.result.warnings)

    def _produce_mlc(self) -> Iterator[MemPoint]:
        from xferscope.engines.mem_mlc import MlcRunner

        runner = MlcRunner(self.spec, self._mlc_path)
        forget = self._on_cancel(runner.stop)
        try:
            yield from runner.points(self._cancel)
        finally:
            forget()
            self.result.warnings.extend(runner.warnings)
            self.result.environment.update(runner.environment)

    def _produce_builtin(self) -> Iterator[MemPoint]:
        spec, plan, core = self.spec, self._plan, self._memcore
        self.result.warnings.extend(plan.notes)
        if not core.NT_STORES and any(t in NT_TRAFFIC for t in spec.traffic):
            self.result.warnings.append("this build has no non-temporal stores: W6..W10 use regular stores "
                                        "(and their read for ownership is counted)")
        ns_per_iter = core.calibrate_delay()
        self.result.environment.update(builtin_environment(spec, plan, ns_per_iter))
        coverage: list[float] = []
        try:
            for stride in spec.strides:
                if self._cancel.is_set():
                    return
                yield from self._sweep_stride(core, stride, ns_per_iter, coverage)
        finally:
            self.result.thp_coverage = min(coverage) if coverage else None
            if self.result.thp_coverage is not None and self.result.thp_coverage < 0.5:
                self.result.warnings.append(
                    f"only {self.result.thp_coverage:.0%} of the buffers sit on huge pages (THP mode "
                    f"{thp_mode() or 'unknown'}): latency includes page walks")

    def _sweep_stride(self, core, stride: int, ns_per_iter: float, coverage: list[float]) -> Iterator[MemPoint]:
        spec, plan = self.spec, self._plan
        session = core.Session(plan.chase_bytes, stride, -1 if plan.latency_cpu is None else plan.latency_cpu,
                               list(plan.load_cpus), plan.load_bytes, list(spec.traffic) if plan.load_cpus else [],
                               spec.seed)
        forget = self._on_cancel(session.stop)
        try:
            try:
                started = session.start()
            except MemoryError:
                raise EnvironmentProblem("not enough memory for the sweep buffers; pass a smaller --buffer or "
                                         "fewer --threads") from None
            except OSError as exc:
                raise EnvironmentProblem(f"memory sweep could not start: {exc}") from None
            if not started:
                return
            share = thp_coverage(session.regions())
            if share is not None:
                coverage.append(share)

            def measure(traffic: str, delay: int | None, loads: bool, chase: bool) -> MemPoint | None:
                info = core.traffic_info(traffic if loads else "R")
                out = session.measure(traffic if loads else "R", delay or 0, loads, chase, plan.warmup_s,
                                      plan.window_s, plan.windows)
                if out["cancelled"]:  # a point cut short is not a point
                    return None
                return point_from_windows(out["windows"], traffic=traffic if loads else IDLE, stride=stride,
                                          delay=delay, read_bytes=info["read_bytes"], write_bytes=info["write_bytes"],
                                          backend="builtin", ns_per_iter=ns_per_iter if loads else None,
                                          latency=chase, bandwidth=loads)

            if spec.mode != "peak":
                point = measure(IDLE, None, loads=False, chase=True)
                if point is None:
                    return
                yield point
            if spec.mode == "idle":
                return
            for traffic in spec.traffic:
                for delay in (spec.delays if spec.mode == "loaded" else (0,)):
                    if self._cancel.is_set():
                        return
                    point = measure(traffic, delay, loads=True, chase=spec.mode == "loaded")
                    if point is None:
                        return
                    yield point
        finally:
            forget()
            session.close()


_DONE = object()


def _unwrap(message: tuple[str, Any]) -> Any:
    """A message from the worker: its point, ``_DONE``, or its error raised here."""
    kind, item = message
    if kind == "error":
        raise item
    return item if kind == "point" else _DONE


def _load_memcore():
    try:
        from xferscope import _memcore
    except ImportError as exc:
        raise EnvironmentProblem(f"the native memory core is not built ({exc}); reinstall xferscope with a C "
                                 "compiler present, or use --backend mlc") from None
    return _memcore


def builtin_environment(spec: MemSpec, plan: MemPlan, ns_per_iter: float) -> dict[str, Any]:
    return {
        "cpu_model": cpu_model(),
        "cpus_allowed": format_cpu_list(allowed_cpus()),
        "kernel": platform.release(),
        "llc_bytes": plan.llc_bytes,
        "thp_mode": thp_mode(),
        "latency_cpu": plan.latency_cpu,
        "load_cpus": format_cpu_list(plan.load_cpus),
        "load_threads": len(plan.load_cpus),
        "chase_bytes": plan.chase_bytes,
        "load_bytes_per_buffer": plan.load_bytes,
        "buffers_per_load_thread": buffers_per_load_thread(spec.traffic),
        "warmup_s": plan.warmup_s,
        "window_s": plan.window_s,
        "windows": plan.windows,
        "ns_per_delay_iter": ns_per_iter,
    }


__all__ = [
    "BACKENDS", "BUILTIN_TRAFFIC", "CSV_COLUMNS", "DEFAULT_DELAYS", "IDLE", "MODES", "MemPlan", "MemPoint",
    "MemResult", "MemSpec", "MemSweep", "allowed_cpus", "csv_text", "format_cpu_list", "group_series",
    "llc_bytes", "parse_cpu_list", "parse_int_list", "point_from_windows", "resolve_plan", "result_json",
    "sanity_warnings", "thp_coverage",
]
