"""Memory sweeps: latency under load and peak bandwidth, measured the way Intel MLC does.

A ``MemSpec`` says what to measure; ``MemSweepRun(spec)`` measures it and streams one
``MemPoint`` per injection delay (or per traffic type in peak mode) as soon as it
is measured, through a blocking iterator or ``async for``; ``cancel()`` stops it
within a second. The built-in backend runs the native core ``xferscope._memcore``
(pinned threads, GIL released); the ``mlc`` backend runs Intel's binary
(``xferscope.memory.mlc``). Both give the same ``MemSweep``.

The family: ``mem_machine`` (what sysfs and procfs say), ``mem_spec`` (what to
measure), ``mem_plan`` (the spec on this machine), ``mem_result`` (points, results,
their files), ``mem_mlc`` (the mlc binary); this module runs sweeps and is where
the others' public names are imported from.

Nothing here knows about terminals or the console.
"""

from __future__ import annotations

import asyncio
import math
import os
import platform
import queue
import statistics
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from msgspec.structs import replace

from xferscope.errors import EnvironmentProblem, RunFailed
from xferscope.memory.machine import (
    BASE_PAGE,
    allowed_cpus,
    cache_levels,
    format_cpu_list,
    llc_bytes,
    nodes_obtained,
    pages_obtained,
    parse_cpu_list,
    thp_coverage,
    thp_mode,
)
from xferscope.memory.plan import (
    HUGETLB_PAGE,
    MatrixCell,
    MemPlan,
    buffers_per_load_thread,
    curve_sizes_for,
    resolve_plan,
)
from xferscope.memory.result import (
    CSV_COLUMNS,
    CURVE,
    IDLE,
    csv_text,
    group_series,
    new_sweep,
    numa_matrix,
    pages_shares,
    result_json,
    sanity_warnings,
    with_figures,
)
from xferscope.memory.spec import (
    BACKENDS,
    BUILTIN_TRAFFIC,
    DEFAULT_DELAYS,
    MODES,
    NT_TRAFFIC,
    PAGE_SIZE_TEXT,
    MemSpec,
    locality_label,
    parse_int_list,
)
from xferscope.records import MemEnvironment, MemPoint, MemSweep
from xferscope.target import cpu_model

# ------------------------------------------------------- from windows to points


#: a window counts for latency when the latency thread ran for at least this share of it
RAN_SHARE = 0.97


def _in_most(windows: list[tuple[int, ...]], i: int) -> bool:
    """Whether the count ``i`` of the windows (1: chase steps, 2: load steps) is above 0 in most of them: their
    median is then of windows in which the threads ran."""
    return 2 * sum(1 for w in windows if w[i]) > len(windows)


def point_from_windows(
    windows: list[tuple[int, ...]],
    *,
    traffic: str,
    stride: int,
    delay: int | None,
    read_bytes: int,
    write_bytes: int,
    backend: str,
    ns_per_iter: float | None,
    latency: bool,
    bandwidth: bool,
) -> MemPoint | None:
    """Median latency (and its min/max) and median bandwidth over complete sub-windows.

    A window is (ns, chase steps, load steps[, ns the latency thread ran]). Latency is window time per load,
    leaving out the windows in which the latency thread was off its CPU (a busy machine: that time is not
    memory latency); ``windows_short`` counts them. When every window was short, latency is the thread's own
    running time per load instead (or, where that clock is unknown, window time as it was)."""
    timed = [w for w in windows if w[1] > 0 and w[0] > 0] if latency else []
    ran = [w for w in timed if len(w) < 4 or not w[3] or w[3] >= RAN_SHARE * w[0]]
    short = len(timed) - len(ran)
    if ran:
        lat = [w[0] / w[1] for w in ran]
    else:
        lat = [w[3] / w[1] for w in timed if len(w) > 3 and w[3]] or [w[0] / w[1] for w in timed]
    step_bytes = read_bytes + write_bytes
    bw = [w[2] * step_bytes / w[0] * 1e3 for w in windows if w[0] > 0] if bandwidth else []
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
        windows_short=short,
    )


# ------------------------------------------------------------- the sweep


class PointStream:
    """How a sweep's points reach its consumer: iterate it once (``for p in sweep``, or ``async for``), or
    ``run()``. A subclass starts the work with ``_start(post)``, a thread that posts ("point", MemPoint) for
    each point, then ("done", None) or ("error", exception); ``_wind_down(thread)`` runs once the consumer
    stops listening (the end, an error, Ctrl-C, a cancelled task)."""

    result: MemSweep

    def cancel(self) -> None:
        raise NotImplementedError

    def _start(self, post: Callable[[tuple[str, Any]], None]) -> threading.Thread:
        raise NotImplementedError

    def _wind_down(self, worker: threading.Thread) -> None:
        if worker.is_alive():
            self.cancel()
        worker.join()

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
            self._wind_down(worker)

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
            await asyncio.to_thread(self._wind_down, worker)

    def run(self, on_point: Callable[[MemPoint], None] | None = None) -> MemSweep:
        """Measure everything (blocking); call ``on_point`` for each point as it comes."""
        for point in self:
            if on_point:
                on_point(point)
        return self.result


class MemSweepRun(PointStream):
    """One sweep. Iterate it (``for p in sweep`` or ``async for p in sweep``) to run it; ``result`` after.

    The work runs in a thread of its own, so the consumer (the CLI's main thread,
    or an asyncio loop) stays responsive: Ctrl-C reaches Python at once, and
    ``cancel()`` makes the sweep stop within a second. The points already
    measured stay in ``result`` with ``cancelled`` set.
    """

    def __init__(self, spec: MemSpec):
        self.spec = spec.validated()
        self.result = new_sweep(self.spec.backend, self.spec)
        self._cancel = threading.Event()
        self._stoppers: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._used = False
        if self.spec.backend == "mlc":
            from xferscope.memory.mlc import find_mlc

            self._mlc_path = find_mlc(self.spec.mlc_path)
        else:
            self._memcore = _load_memcore()
            self._plan = resolve_plan(self.spec)

    def expected_points(self) -> int:
        """How many points the sweep will measure (for progress; the mlc backend's count is a close guess)."""
        spec = self.spec
        strides = len(spec.strides)
        idle = 2 if spec.whole_idle and spec.locality != "whole" else 1
        if spec.mode == "idle":
            return strides * idle
        if spec.mode == "peak":
            return len(spec.traffic_types) * (strides if spec.backend == "builtin" else 1)
        if spec.mode == "curve":
            sizes = (
                len(self._plan.curve_sizes)
                if spec.backend == "builtin"
                else len(curve_sizes_for(spec, llc_bytes(spec.sysfs)))
            )
            return strides * sizes
        if spec.mode == "matrix":
            return strides * 2 * (len(self._plan.matrix) if spec.backend == "builtin" else 1)
        return strides * (idle + len(spec.traffic_types) * len(spec.delays))

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

    # -- the work

    def _start(self, post: Callable[[tuple[str, Any]], None]) -> threading.Thread:
        if self._used:
            raise RuntimeError("a MemSweepRun runs once; make a new one")
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
        finish_result(self.result, cancelled=self._cancel.is_set())

    def _produce_mlc(self) -> Iterator[MemPoint]:
        from xferscope.memory.mlc import MlcRunner

        runner = MlcRunner(self.spec, self._mlc_path)
        cpu = self.spec.latency_cpu if self.spec.latency_cpu is not None else allowed_cpus()[0]
        self.result.environment["caches"] = [
            {"name": c.name, "size": c.size} for c in cache_levels(cpu, self.spec.sysfs)
        ]
        forget = self._on_cancel(runner.stop)
        try:
            yield from runner.points(self._cancel)
        finally:
            forget()
            self.result.warnings.extend(runner.warnings)
            self.result.environment.update(runner.environment)
            self.result.pages = runner.pages

    def _produce_builtin(self) -> Iterator[MemPoint]:
        spec, plan, core = self.spec, self._plan, self._memcore
        self.result.warnings.extend(plan.notes)
        self.result.pages = spec.pages
        if not core.NT_STORES and any(t in NT_TRAFFIC for t in spec.traffic_types) and spec.mode in ("loaded", "peak"):
            self.result.warnings.append(
                "this build has no non-temporal stores: W6..W10 use regular stores "
                "(and their read for ownership is counted)"
            )
        ns_per_iter = core.calibrate_delay()
        self.result.environment.update(builtin_environment(spec, plan, ns_per_iter))
        self._obtained: dict[int, int] = {}
        produce = {"curve": self._curve_stride, "matrix": self._matrix_stride}.get(spec.mode, self._sweep_stride)
        try:
            for stride in spec.strides:
                if self._cancel.is_set():
                    return
                yield from produce(core, stride, ns_per_iter)
        finally:
            total = sum(self._obtained.values())
            huge = sum(v for k, v in self._obtained.items() if k > BASE_PAGE)
            self.result.thp_coverage = huge / total if total else None
            self.result.pages_obtained = pages_shares(self._obtained)
            wanted_huge = spec.pages != "4k" and spec.mode != "curve"  # a curve's small sets fit in one page
            if wanted_huge and self.result.thp_coverage is not None and self.result.thp_coverage < 0.5:
                self.result.warnings.append(
                    f"only {self.result.thp_coverage:.0%} of the buffers sit on huge pages (THP mode "
                    f"{thp_mode(spec.sysfs) or 'unknown'}): latency includes page walks"
                )

    @contextmanager
    def _session(
        self, core, chase_bytes: int, stride: int, chase_cpu: int | None, load_cpus, load_bytes: int, traffic, **options
    ):
        """A started native session (None when cancelled while starting), closed afterwards; the page sizes it
        obtained are counted."""
        session = core.Session(
            chase_bytes,
            stride,
            -1 if chase_cpu is None else chase_cpu,
            list(load_cpus),
            load_bytes,
            list(traffic),
            self.spec.seed,
            pages=self.spec.pages,
            **options,
        )
        forget = self._on_cancel(session.stop)
        try:
            try:
                started = session.start()
            except MemoryError:
                raise EnvironmentProblem(self._no_memory_reason()) from None
            except OSError as exc:
                raise EnvironmentProblem(f"memory sweep could not start: {exc}") from None
            if not started:
                yield None
                return
            for page, got in pages_obtained(session.regions()).items():
                self._obtained[page] = self._obtained.get(page, 0) + got
            yield session
        finally:
            forget()
            session.close()

    def _no_memory_reason(self) -> str:
        if self.spec.pages in HUGETLB_PAGE:
            return (
                f"the reserved {PAGE_SIZE_TEXT[self.spec.pages]} ran out (they may sit on another NUMA node); "
                "reserve more or use --pages thp"
            )
        return "not enough memory for the sweep buffers; pass a smaller --buffer or fewer --threads"

    def _measure(self, session, traffic: str, delay: int | None, *, loads: bool, chase: bool, whole: bool = False):
        """The sub-windows of one point, or None when it was cut short (a point cut short is not a point). A
        measurement in which the threads made progress in no more than half of the windows (a machine busy
        enough that they seldom ran: the median of the windows would be of windows they were off their CPUs) is
        taken again, ``TRIES`` times and for ``PATIENCE_S`` at least (a short point's thread may miss a few of
        its windows on a busy machine), then fails saying so."""
        plan = self._plan
        per_try = plan.warmup_s + plan.window_s * plan.windows
        tries = max(TRIES, math.ceil(PATIENCE_S / per_try)) if per_try > 0 else TRIES
        for _ in range(tries):
            out = session.measure(
                traffic if loads else "R",
                delay or 0,
                loads,
                chase,
                plan.warmup_s,
                plan.window_s,
                plan.windows,
                whole=whole,
            )
            if out["cancelled"]:
                return None
            windows = out["windows"]
            if (not chase or _in_most(windows, 1)) and (not loads or _in_most(windows, 2)):
                return windows
        who = "latency thread" if chase else "load threads"
        raise RunFailed(
            f"the {who} made progress in at most half of their windows in {tries} tries of {per_try:g} s each: this "
            "machine is too busy to "
            "measure; retry when it is quieter or with a longer --point-seconds"
        )

    def _latency_point(
        self, session, stride: int, window: int, buffer: int, *, whole: bool = False, traffic: str = IDLE, **where
    ) -> MemPoint | None:
        """An idle-latency point; ``window`` 0 is the whole buffer. A cache-curve point is named by the locality
        asked for even where its working set fits in one window (the chase is then one cycle over all of it)."""
        windows = self._measure(session, "R", None, loads=False, chase=True, whole=whole)
        if windows is None:
            return None
        if traffic == CURVE:
            window = self._plan.window_for(self.spec, stride, 1 << 62)
        bytes_ = None if whole or not window else window
        point = point_from_windows(
            windows,
            traffic=traffic,
            stride=stride,
            delay=None,
            read_bytes=0,
            write_bytes=0,
            backend="builtin",
            ns_per_iter=None,
            latency=True,
            bandwidth=False,
        )
        return point and replace(
            point,
            locality=locality_label(bytes_, None if traffic == CURVE else buffer),
            locality_bytes=bytes_,
            size_bytes=buffer,
            **where,
        )

    def _sweep_stride(self, core, stride: int, ns_per_iter: float) -> Iterator[MemPoint]:
        spec, plan = self.spec, self._plan
        window = plan.window_for(spec, stride, plan.chase_bytes) if plan.chase_bytes else 0
        whole_too = bool(window) and spec.whole_idle and spec.mode != "peak"
        with self._session(
            core,
            plan.chase_bytes,
            stride,
            plan.latency_cpu,
            plan.load_cpus,
            plan.load_bytes,
            spec.traffic if plan.load_cpus else [],
            window=window,
            whole_chase=whole_too,
        ) as session:
            if session is None:
                return
            if spec.mode != "peak":
                for whole in (False, True) if whole_too else (False,):
                    point = self._latency_point(session, stride, window, plan.chase_bytes, whole=whole)
                    if point is None:
                        return
                    yield point
            if spec.mode == "idle":
                return
            label = locality_label(window or None, plan.chase_bytes)
            for traffic in spec.traffic_types:
                info = core.traffic_info(traffic)
                for delay in spec.delays if spec.mode == "loaded" else (0,):
                    if self._cancel.is_set():
                        return
                    chase = spec.mode == "loaded"
                    windows = self._measure(session, traffic, delay, loads=True, chase=chase)
                    point = windows and point_from_windows(
                        windows,
                        traffic=traffic,
                        stride=stride,
                        delay=delay,
                        read_bytes=info["read_bytes"],
                        write_bytes=info["write_bytes"],
                        backend="builtin",
                        ns_per_iter=ns_per_iter,
                        latency=chase,
                        bandwidth=True,
                    )
                    if not point:
                        return
                    if chase:
                        point = replace(
                            point, locality=label, locality_bytes=window or None, size_bytes=plan.chase_bytes
                        )
                    yield point

    def _curve_stride(self, core, stride: int, ns_per_iter: float) -> Iterator[MemPoint]:
        """lmbench's lat_mem_rd: one chase per working-set size, 4 KiB to several times the last-level cache."""
        spec, plan = self.spec, self._plan
        for size in plan.curve_sizes:
            if self._cancel.is_set():
                return
            size -= size % stride
            window = plan.window_for(spec, stride, size)
            with self._session(core, size, stride, plan.latency_cpu, (), 0, (), window=window) as session:
                point = session and self._latency_point(session, stride, window, size, traffic=CURVE)
                if not point:
                    return
                yield point

    def _matrix_stride(self, core, stride: int, ns_per_iter: float) -> Iterator[MemPoint]:
        """MLC's --latency_matrix and --bandwidth_matrix: each node's CPUs against each node's memory."""
        spec, plan = self.spec, self._plan
        window = plan.window_for(spec, stride, plan.chase_bytes)
        read = core.traffic_info("R")
        for cell in plan.matrix:
            with self._session(
                core,
                plan.chase_bytes,
                stride,
                cell.latency_cpu,
                (),
                0,
                (),
                window=window,
                chase_touch_cpu=cell.touch_cpu,
                mem_node=cell.mem_node,
            ) as session:
                point = session and self._latency_point(
                    session, stride, window, plan.chase_bytes, cpu_node=cell.cpu_node, mem_node=cell.mem_node
                )
                if not point:
                    return
                self._check_placement(session, cell)
                yield point
            if self._cancel.is_set():
                return
            touch = [cell.touch_cpu] * len(cell.load_cpus)
            with self._session(
                core,
                0,
                stride,
                None,
                cell.load_cpus,
                plan.load_bytes,
                ["R"],
                load_touch_cpus=touch,
                mem_node=cell.mem_node,
            ) as session:
                windows = session and self._measure(session, "R", 0, loads=True, chase=False)
                point = windows and point_from_windows(
                    windows,
                    traffic="R",
                    stride=stride,
                    delay=0,
                    read_bytes=read["read_bytes"],
                    write_bytes=read["write_bytes"],
                    backend="builtin",
                    ns_per_iter=ns_per_iter,
                    latency=False,
                    bandwidth=True,
                )
                if not point:
                    return
                self._check_placement(session, cell)
                yield replace(point, cpu_node=cell.cpu_node, mem_node=cell.mem_node)

    def _check_placement(self, session, cell: MatrixCell) -> None:
        """Say where a cell's memory really is when it is not (all) on the node asked for."""
        info = session.info()
        pages = nodes_obtained(session.regions())
        total = sum(pages.values())
        elsewhere = {n: c for n, c in pages.items() if n != cell.mem_node}
        if not info["bind_errno"] and not elsewhere:
            return
        how = (
            f"the kernel refused to bind it there ({os.strerror(info['bind_errno'])}), so it was placed by first "
            f"touch from CPU {cell.touch_cpu}"
            if info["bind_errno"]
            else "it was bound there"
        )
        got = ", ".join(f"{c / total:.0%} on node {n}" for n, c in sorted(pages.items())) if total else "not known"
        warning = f"memory for node {cell.mem_node}: {how}; pages obtained: {got}"
        if warning not in self.result.warnings:
            self.result.warnings.append(warning)


def finish_result(result: MemSweep, *, cancelled: bool, error: str | None = None) -> None:
    """What a sweep says once it ends (whole, cancelled or cut short by ``error``): the busy and sanity warnings,
    the one-node note, the figures its points give."""
    result.cancelled = cancelled
    result.error = error or result.error
    warning = busy_warning(result.points)
    if warning and warning not in result.warnings:
        result.warnings.append(warning)
    result.warnings.extend(w for w in sanity_warnings(result.points) if w not in result.warnings)
    cells = numa_matrix(result.points)
    if cells and len(cells["cpu_nodes"]) == 1 and len(cells["mem_nodes"]) == 1 and ONE_NODE_NOTE not in result.notes:
        result.notes.append(ONE_NODE_NOTE)
    with_figures(result)


def busy_warning(points: list[MemPoint]) -> str | None:
    """One line when the latency thread lost its CPU in some windows (their time is not memory latency)."""
    timed = [p for p in points if p.latency_ns is not None and p.windows]
    short = sum(p.windows_short for p in timed)
    if not short:
        return None
    spoiled = sum(1 for p in timed if p.windows_short >= p.windows)
    text = (
        f"the latency thread was off its CPU in {short} of {sum(p.windows for p in timed)} windows (the "
        "machine is busy): those windows were left out"
    )
    if spoiled:
        text += (
            f"; {spoiled} point(s) had no clean window: their latency is the thread's own running time per "
            "load; measure on a quieter machine"
        )
    return text


_DONE = object()
TRIES = 4  # measurements of a point before a thread that never ran fails the sweep ...
PATIENCE_S = 2.0  # ... and at least this long in all
ONE_NODE_NOTE = "one NUMA node: the matrix is 1x1 (local memory only)"


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
        raise EnvironmentProblem(
            f"the native memory core is not built ({exc}); reinstall xferscope with a C "
            "compiler present, or use --backend mlc"
        ) from None
    return _memcore


def builtin_environment(spec: MemSpec, plan: MemPlan, ns_per_iter: float) -> MemEnvironment:
    return {
        "cpu_model": cpu_model(),
        "cpus_allowed": format_cpu_list(allowed_cpus()),
        "kernel": platform.release(),
        "llc_bytes": plan.llc_bytes,
        "caches": [{"name": c.name, "size": c.size} for c in plan.caches],
        "thp_mode": thp_mode(spec.sysfs),
        "pages": spec.pages,
        "locality": spec.locality,
        "latency_cpu": plan.latency_cpu,
        "load_cpus": format_cpu_list(plan.load_cpus),
        "load_threads": len(plan.load_cpus),
        "chase_bytes": plan.chase_bytes,
        "load_bytes_per_buffer": plan.load_bytes,
        "buffers_per_load_thread": buffers_per_load_thread(spec.traffic_types),
        "warmup_s": plan.warmup_s,
        "window_s": plan.window_s,
        "windows": plan.windows,
        "ns_per_delay_iter": ns_per_iter,
        **(
            {
                "numa_nodes": [
                    {"node": n.node, "cpus": format_cpu_list(n.cpus), "memory": n.memory} for n in plan.topology
                ]
            }
            if plan.topology
            else {}
        ),
        **({"sysfs": spec.sysfs} if spec.sysfs != "/sys" else {}),
        **({"curve_sizes": list(plan.curve_sizes)} if plan.curve_sizes else {}),
    }


__all__ = [
    "BACKENDS",
    "BUILTIN_TRAFFIC",
    "CSV_COLUMNS",
    "CURVE",
    "DEFAULT_DELAYS",
    "IDLE",
    "MODES",
    "MemPlan",
    "MemSpec",
    "MemSweepRun",
    "PointStream",
    "allowed_cpus",
    "csv_text",
    "finish_result",
    "format_cpu_list",
    "group_series",
    "llc_bytes",
    "parse_cpu_list",
    "parse_int_list",
    "point_from_windows",
    "resolve_plan",
    "result_json",
    "sanity_warnings",
    "thp_coverage",
]
