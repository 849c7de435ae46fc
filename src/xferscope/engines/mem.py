"""Memory sweeps: latency under load and peak bandwidth, measured the way Intel MLC does.

A ``MemSpec`` says what to measure; ``MemSweep(spec)`` measures it and streams one
``MemPoint`` per injection delay (or per traffic type in peak mode) as soon as it
is measured, through a blocking iterator or ``async for``; ``cancel()`` stops it
within a second. The built-in backend runs the native core ``xferscope._memcore``
(pinned threads, GIL released); the ``mlc`` backend runs Intel's binary
(``xferscope.mlc``). Both give the same ``MemResult``.

Nothing here knows about terminals or the console.
"""
from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import os
import platform
import queue
import re
import statistics
import threading
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator

from xferscope.errors import EnvironmentProblem, SpecError

MODES = ("idle", "loaded", "peak")
BACKENDS = ("builtin", "mlc")
BUILTIN_TRAFFIC = ("R", "W2", "W3", "W5", "W6", "W7", "W8", "W9", "W10")
NT_TRAFFIC = ("W6", "W7", "W8", "W9", "W10")
# MLC's default injection delays for --loaded_latency.
DEFAULT_DELAYS = (0, 2, 8, 15, 50, 100, 200, 300, 400, 500, 700, 1000, 1300, 1700, 2500, 3500, 5000, 9000, 20000)
CSV_COLUMNS = ("delay", "latency_ns", "bandwidth_mb_s", "read_mb_s", "write_mb_s", "traffic", "stride", "backend")
IDLE = "idle"  # the traffic label of an idle-latency point

MIB = 1 << 20
GIB = 1 << 30
HUGE_PAGE = 2 * MIB
MIN_BUFFER = MIB
MAX_DELAY = 10_000_000


# ---------------------------------------------------------------- the spec


@dataclass(frozen=True)
class MemSpec:
    """What to measure. ``validated()`` returns a normalised copy or raises SpecError."""

    mode: str = "loaded"
    traffic: tuple[str, ...] = ("R",)
    strides: tuple[int, ...] = (64,)
    delays: tuple[int, ...] = DEFAULT_DELAYS
    point_seconds: float = 2.0
    threads: int | None = None  # load threads; default: every CPU but the latency thread's
    cpus: tuple[int, ...] | None = None  # load-thread CPUs (MLC's -k)
    latency_cpu: int | None = None  # default: the first allowed CPU not in ``cpus``
    buffer_bytes: int | None = None  # per thread (MLC's -b); default from the last-level cache size
    backend: str = "builtin"
    mlc_path: str | None = None
    seed: int = 0x5EED

    def validated(self) -> "MemSpec":
        mode = str(self.mode).lower()
        if mode not in MODES:
            raise SpecError("mode", f"{self.mode!r} is not a mode; use idle, loaded or peak")
        backend = str(self.backend).lower()
        if backend not in BACKENDS:
            raise SpecError("backend", f"{self.backend!r} is not a backend; use builtin or mlc")
        traffic = tuple(_traffic_name(t, backend) for t in self.traffic)
        if not traffic:
            raise SpecError("traffic", "name at least one traffic type, e.g. R or W6")
        strides = tuple(self.strides)
        if not strides:
            raise SpecError("stride", "name at least one stride in bytes, e.g. 64")
        for s in strides:
            if not isinstance(s, int) or s < 64 or s > 4096 or s % 64:
                raise SpecError("stride", f"{s!r} is not a stride we measure; use a multiple of 64 from 64 to 4096")
        delays = tuple(self.delays)
        if not delays:
            raise SpecError("delays", "name at least one injection delay, e.g. 0,100,1000")
        for d in delays:
            if not isinstance(d, int) or d < 0 or d > MAX_DELAY:
                raise SpecError("delays", f"{d!r} is not a delay; use whole numbers from 0 to {MAX_DELAY}")
        seconds = float(self.point_seconds)
        if not (0.05 <= seconds <= 600) or math.isnan(seconds):
            raise SpecError("point_seconds", f"{self.point_seconds!r} is out of range; use 0.05 to 600 seconds")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise SpecError("threads", f"{self.threads!r} is not a thread count; use 1 or more")
        cpus = None if self.cpus is None else tuple(self.cpus)
        if cpus is not None:
            if not cpus:
                raise SpecError("cpus", "the CPU list is empty; name CPUs like 1-15 or 2,4,6")
            if len(set(cpus)) != len(cpus):
                raise SpecError("cpus", "a CPU is named twice; name each load CPU once")
            allowed = allowed_cpus()
            for c in cpus:
                if c not in allowed:
                    raise SpecError("cpus", f"CPU {c} is not available to this process; pick from {format_cpu_list(allowed)}")
        if self.latency_cpu is not None and self.latency_cpu not in allowed_cpus():
            raise SpecError("latency_cpu", f"CPU {self.latency_cpu} is not available; pick from {format_cpu_list(allowed_cpus())}")
        if cpus is not None and self.latency_cpu is not None and self.latency_cpu in cpus and mode == "loaded":
            raise SpecError("latency_cpu", f"CPU {self.latency_cpu} also runs a load thread; pick a CPU not in --cpus")
        if self.buffer_bytes is not None:
            if not isinstance(self.buffer_bytes, int) or self.buffer_bytes < MIN_BUFFER:
                raise SpecError("buffer", f"{self.buffer_bytes!r} is too small; use at least 1M (default: 4x the last-level cache)")
            if self.buffer_bytes // min(strides) >= 2**32:
                raise SpecError("buffer", "the buffer holds more than 2^32 chase elements; use a smaller buffer or a larger stride")
        return replace(self, mode=mode, backend=backend, traffic=traffic, strides=strides, delays=delays,
                       point_seconds=seconds, cpus=cpus)


def _traffic_name(name: Any, backend: str) -> str:
    text = str(name).strip().upper()
    if text in BUILTIN_TRAFFIC:
        return text
    if backend == "mlc" and re.fullmatch(r"W\d{1,2}", text):
        return text
    hint = ", ".join(BUILTIN_TRAFFIC)
    raise SpecError("traffic", f"{name!r} is not a traffic type we generate; use one of {hint}")


def parse_int_list(text: str, field_name: str) -> tuple[int, ...]:
    """'0,100,1000' -> (0, 100, 1000); one line naming the field when it is not a list of whole numbers."""
    items = [t for t in re.split(r"[,\s]+", str(text).strip()) if t]
    try:
        return tuple(int(t) for t in items)
    except ValueError:
        raise SpecError(field_name, f"{text!r} is not a list of whole numbers; write them like 0,100,1000") from None


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """'1-3,8' -> (1, 2, 3, 8)."""
    cpus: list[int] = []
    for part in [p for p in str(text).replace(" ", "").split(",") if p]:
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise SpecError("cpus", f"{part!r} is not a CPU or range; write CPUs like 1-15 or 2,4,6")
        lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
        if hi < lo:
            raise SpecError("cpus", f"{part!r} runs backwards; write the lower CPU first")
        cpus.extend(range(lo, hi + 1))
    return tuple(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """(1, 2, 3, 8) -> '1-3,8'."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


# ------------------------------------------------------------ the results


@dataclass(frozen=True)
class MemPoint:
    """One measured point. Bandwidths in MB/s with 1 MB = 10^6 bytes; None where not measured."""

    delay: int | None
    latency_ns: float | None
    latency_min_ns: float | None
    latency_max_ns: float | None
    bandwidth_mb_s: float | None
    read_mb_s: float | None
    write_mb_s: float | None
    traffic: str  # R, W2..W10, or "idle" for an idle-latency point
    stride: int | None
    backend: str
    ns_per_delay_iter: float | None = None
    windows: int = 0  # sub-windows behind the medians

    def csv_row(self) -> list[str]:
        return [_cell(self.delay, "{}"), _cell(self.latency_ns, "{:.2f}"), _cell(self.bandwidth_mb_s, "{:.1f}"),
                _cell(self.read_mb_s, "{:.1f}"), _cell(self.write_mb_s, "{:.1f}"), self.traffic,
                _cell(self.stride, "{}"), self.backend]


def _cell(value: Any, fmt: str) -> str:
    return "" if value is None else fmt.format(value)


@dataclass
class MemResult:
    """Everything one sweep (or one imported MLC output) produced."""

    points: list[MemPoint] = field(default_factory=list)
    backend: str = "builtin"
    thp_coverage: float | None = None  # fraction of the buffers backed by huge pages
    warnings: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    cancelled: bool = False
    spec: MemSpec | None = None

    @property
    def idle_points(self) -> list[MemPoint]:
        return [p for p in self.points if p.traffic == IDLE]

    @property
    def idle_latency_ns(self) -> float | None:
        idle = self.idle_points
        return idle[0].latency_ns if idle else None

    @property
    def curve_points(self) -> list[MemPoint]:
        return [p for p in self.points if p.traffic != IDLE]

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "cancelled": self.cancelled,
            "idle_latency_ns": self.idle_latency_ns,
            "thp_coverage": self.thp_coverage,
            "warnings": list(self.warnings),
            "environment": dict(self.environment),
            "spec": None if self.spec is None else asdict(self.spec),
            "points": [asdict(p) for p in self.points],
        }


def write_csv(result: MemResult, target: str | io.TextIOBase) -> None:
    """One row per point, columns CSV_COLUMNS."""
    if isinstance(target, str):
        with open(target, "w", newline="", encoding="utf-8") as fh:
            write_csv(result, fh)
        return
    writer = csv.writer(target, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for point in result.points:
        writer.writerow(point.csv_row())


def result_json(result: MemResult) -> str:
    return json.dumps(result.to_dict(), indent=2)


def write_json(result: MemResult, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(result_json(result) + "\n")


def check_output_paths(json_out: str | None, csv_out: str | None) -> None:
    """Fail before measuring when an output file could not be written afterwards."""
    for option, path in (("--json", json_out), ("--csv", csv_out)):
        if not path:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise SpecError(option, f"{path} is a folder; name a file")
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise SpecError(option, f"cannot write {path}: its folder does not exist or is not writable; "
                                    "pick a writable path")


def write_outputs(result: MemResult, json_out: str | None, csv_out: str | None) -> None:
    """Write the files a command was asked for; an unwritable path is one line naming the option."""
    for option, path, writer in (("--json", json_out, write_json), ("--csv", csv_out, write_csv)):
        if not path:
            continue
        try:
            writer(result, path)
        except OSError as exc:
            raise SpecError(option, f"cannot write {path}: {exc.strerror or exc}; pick a writable path") from None


# --------------------------------------------------------- the machine


def allowed_cpus() -> tuple[int, ...]:
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return tuple(range(os.cpu_count() or 1))


def llc_bytes() -> int | None:
    """Size of the last-level cache seen by CPU 0, from sysfs."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    best: tuple[int, int] | None = None
    try:
        entries = os.listdir(base)
    except OSError:
        return None
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(f"{base}/{entry}/level") as fh:
                level = int(fh.read())
            with open(f"{base}/{entry}/type") as fh:
                kind = fh.read().strip()
            with open(f"{base}/{entry}/size") as fh:
                size = _sysfs_size(fh.read())
        except (OSError, ValueError):
            continue
        if kind in ("Unified", "Data") and (best is None or level > best[0]):
            best = (level, size)
    return best[1] if best else None


def _sysfs_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)([KMG]?)", text.strip())
    if not match:
        raise ValueError(text)
    return int(match.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)]


def thp_mode() -> str | None:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
            match = re.search(r"\[(\w+)\]", fh.read())
        return match.group(1) if match else None
    except OSError:
        return None


def available_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # psutil missing or unreadable /proc: no check, not a failure
        return None


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def thp_coverage(regions: Iterable[tuple[int, int]], smaps: str = "/proc/self/smaps") -> float | None:
    """Fraction of the resident bytes of the mappings holding ``regions`` that sit on huge pages."""
    spans = [(start, start + size) for start, size in regions]
    if not spans:
        return None
    rss = huge = 0
    inside = False
    try:
        with open(smaps) as fh:
            for line in fh:
                head = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
                if head:
                    lo, hi = int(head.group(1), 16), int(head.group(2), 16)
                    inside = any(lo < end and hi > start for start, end in spans)
                elif inside and line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif inside and line.startswith("AnonHugePages:"):
                    huge += int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return huge / rss if rss else None


# ------------------------------------------------------------ the plan


@dataclass(frozen=True)
class MemPlan:
    """The spec resolved against this machine: CPUs, buffer sizes, windows."""

    latency_cpu: int | None
    load_cpus: tuple[int, ...]
    chase_bytes: int
    load_bytes: int
    warmup_s: float
    window_s: float
    windows: int
    llc_bytes: int | None
    notes: tuple[str, ...] = ()


def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def sub_windows(point_seconds: float) -> tuple[float, float, int]:
    """(warm-up, window, count): about 0.1 s windows, 3 to 10 of them; the warm-up is dropped."""
    count = max(3, min(10, round(point_seconds / 0.1)))
    return min(0.1, point_seconds / 4), point_seconds / count, count


def buffers_per_load_thread(traffic: Iterable[str]) -> int:
    needs = set()
    for name in traffic:
        if name != "W6":
            needs.add("rd0")
        if name == "W10":
            needs.add("rd1")
        if name not in ("R", "W5"):
            needs.add("wr")
    return len(needs)


def resolve_plan(spec: MemSpec) -> MemPlan:
    allowed = allowed_cpus()
    notes: list[str] = []
    if spec.mode == "peak":
        latency_cpu = None
        load = spec.cpus or allowed
    else:
        if spec.latency_cpu is not None:
            latency_cpu = spec.latency_cpu
        else:
            free = [c for c in allowed if not spec.cpus or c not in spec.cpus]
            latency_cpu = free[0] if free else allowed[0]
        load = spec.cpus or tuple(c for c in allowed if c != latency_cpu)
    if spec.mode == "idle":
        load = ()
    if spec.threads is not None and spec.mode != "idle":
        if spec.threads > len(load):
            free = format_cpu_list(load) or "none"
            raise SpecError("threads", f"{spec.threads} load threads asked but only {len(load)} CPU(s) are free "
                                       f"for them ({free}); ask for at most {len(load)}")
        load = tuple(load[: spec.threads])
    if spec.mode == "loaded" and not load:
        raise EnvironmentProblem("loaded latency needs a CPU for the latency thread and at least one more for "
                                 f"load threads; this process may use {format_cpu_list(allowed)}")

    llc = llc_bytes()
    if spec.buffer_bytes is not None:
        chase = load_bytes = spec.buffer_bytes
    else:
        chase = max(GIB, 4 * (llc or 0))
        load_bytes = max(64 * MIB, _round_up(4 * (llc or 0) // max(1, len(load)), HUGE_PAGE))
    chase -= chase % max(spec.strides)
    load_bytes -= load_bytes % max(spec.strides)
    if spec.mode == "peak":
        chase = 0

    need = chase + len(load) * buffers_per_load_thread(spec.traffic) * load_bytes
    avail = available_memory()
    if avail is not None and need > 0.8 * avail:
        raise EnvironmentProblem(f"the sweep needs {need / GIB:.1f} GiB of buffers and {avail / GIB:.1f} GiB is "
                                 "available; pass a smaller --buffer or fewer --threads")
    if llc and chase and chase < 4 * llc:
        notes.append(f"the latency buffer ({chase / MIB:.0f} MiB) is smaller than 4x the last-level cache "
                     f"({llc / MIB:.0f} MiB): latency may come partly from cache; use --buffer {_round_up(4 * llc, GIB) // GIB}G")
    warmup, window, count = sub_windows(spec.point_seconds)
    return MemPlan(latency_cpu if spec.mode != "peak" else None, tuple(load), chase, load_bytes, warmup, window,
                   count, llc, tuple(notes))


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


# ------------------------------------------------------------- sanity


IDLE_RANGE_NS = (60.0, 200.0)


def sanity_warnings(points: list[MemPoint]) -> list[str]:
    """The checks of a trustworthy curve; each is a warning, never a failure."""
    out: list[str] = []
    idle_by_stride = {p.stride: p.latency_ns for p in points if p.traffic == IDLE and p.latency_ns}
    for stride, idle in idle_by_stride.items():
        if not IDLE_RANGE_NS[0] <= idle <= IDLE_RANGE_NS[1]:
            out.append(f"idle latency {idle:.1f} ns (stride {stride}) is outside the 60-200 ns usual for DRAM: "
                       "the buffer may fit in cache, or the memory is remote or slow")
    for (traffic, stride), series in group_series(points).items():
        if traffic == IDLE:
            continue
        series = sorted(series, key=lambda p: p.delay or 0)
        idle = idle_by_stride.get(stride)
        lat = [p for p in series if p.latency_ns is not None]
        if idle and len(lat) >= 2:
            last = lat[-1]
            if abs(last.latency_ns - idle) > 0.05 * idle:
                out.append(f"{traffic} stride {stride}: latency at the largest delay ({last.delay}) is "
                           f"{last.latency_ns:.1f} ns, more than 5% away from idle ({idle:.1f} ns)")
            first = lat[0]
            if first.delay == 0 and first.latency_ns < 1.3 * idle:
                out.append(f"{traffic} stride {stride}: latency at delay 0 ({first.latency_ns:.1f} ns) is below "
                           f"1.3x idle ({idle:.1f} ns): the load threads may not saturate memory")
        rising, lowest = [], None  # (bandwidth, delay) lowest so far, at smaller delays
        for p in series:
            if not p.bandwidth_mb_s:
                continue
            if lowest and p.bandwidth_mb_s > 1.05 * lowest[0]:
                rising.append(f"{lowest[1]}->{p.delay}")
            if lowest is None or p.bandwidth_mb_s < lowest[0]:
                lowest = (p.bandwidth_mb_s, p.delay)
        if rising:
            out.append(f"{traffic} stride {stride}: bandwidth rises as delay rises ({', '.join(rising)})")
    return out


def group_series(points: Iterable[MemPoint]) -> dict[tuple[str, int | None], list[MemPoint]]:
    groups: dict[tuple[str, int | None], list[MemPoint]] = {}
    for p in points:
        groups.setdefault((p.traffic, p.stride), []).append(p)
    return groups


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
            from xferscope.mlc import find_mlc

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
        from xferscope.mlc import MlcRunner

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
    "MemResult", "MemSpec", "MemSweep", "check_output_paths", "format_cpu_list", "group_series", "parse_cpu_list",
    "parse_int_list", "point_from_windows", "resolve_plan", "result_json", "sanity_warnings", "thp_coverage",
    "write_csv", "write_json", "write_outputs",
]
