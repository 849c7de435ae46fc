"""The engine protocol every transfer path implements, and the records engines produce.

An engine moves data; it knows nothing of terminals or screens. The life of
one run:

    engine = EngineClass(spec, target)   # cheap
    engine.prepare()                     # buffers, handles, registrations: outside the timed region
    engine.start()                       # workers begin; the timed region starts when all are ready
    engine.snapshot()                    # cumulative counters, any time, from any thread, cheap
    engine.stop(); engine.wait(t)        # cancellation: workers finish the operation in flight
    engine.close()                       # frees everything; idempotent, safe after a failure

``xferscope.run.runner.EngineRun`` drives an engine, samples it at a fixed interval and
turns snapshots into ``Sample``s and one ``RunResult``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from xferscope.records import EngineEnvironment, GpuReading, RunEnvironment
from xferscope.spec import RunSpec
from xferscope.stats import Histogram


@dataclass(frozen=True)
class WorkerCounters:
    read_ops: int
    write_ops: int
    read_bytes: int
    write_bytes: int
    read_lat_sum_ns: int
    write_lat_sum_ns: int
    done_ns: int | None  # time since start when the worker finished, None while running
    cpu_usr_us: int = 0  # the worker thread's CPU time in the timed region (known once it is done)
    cpu_sys_us: int = 0
    lanes_usr_us: int = 0  # the CPU time of its lanes (threads issuing the sub-requests of --split), summed
    lanes_sys_us: int = 0
    lane_max_us: int = 0  # the busiest lane's user + system time

    @property
    def ops(self) -> int:
        return self.read_ops + self.write_ops

    @property
    def bytes(self) -> int:
        return self.read_bytes + self.write_bytes


@dataclass(frozen=True)
class Snapshot:
    """Cumulative counters of every worker at time ``t_ns`` after the timed region began."""

    t_ns: int
    workers: tuple[WorkerCounters, ...]
    hist_read: Histogram
    hist_write: Histogram
    lat_min_ns: int
    lat_max_ns: int
    first_done: tuple[int, int, int] | None  # (t_ns, bytes, ops) of all workers when the first finished
    done: int
    error: tuple[str, int] | None  # (message, offset)

    @property
    def bytes(self) -> int:
        return sum(w.bytes for w in self.workers)

    @property
    def ops(self) -> int:
        return sum(w.ops for w in self.workers)

    @classmethod
    def from_native(cls, raw: dict) -> Snapshot:
        return cls(
            t_ns=raw["t_ns"],
            workers=tuple(WorkerCounters(*row) for row in raw["workers"]),
            hist_read=Histogram.from_bytes(raw["hist_read"]),
            hist_write=Histogram.from_bytes(raw["hist_write"]),
            lat_min_ns=raw["lat_min_ns"],
            lat_max_ns=raw["lat_max_ns"],
            first_done=raw["first_done"],
            done=raw["done"],
            error=raw["error"],
        )


class Engine(ABC):
    """One transfer path. Subclasses set ``name`` (the path) and ``xfer_type`` (gdsio's name)."""

    name: ClassVar[str]
    xfer_type: ClassVar[str]
    description: ClassVar[str] = ""

    def __init__(self, spec: RunSpec, target: Any):
        self.spec = spec
        self.target = target
        #: words every output shows beside the figures, e.g. "buffered", "cuFile compat mode", "psync"
        self.labels: list[str] = []
        #: GPU index of each worker (None for host-only paths)
        self.worker_gpus: Sequence[int | None] = [None] * spec.workers

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when this path can run on this machine; otherwise why not, in the user's terms."""
        return None

    def after_run(self) -> None:  # noqa: B027 (a hook: most engines have nothing to add)
        """The run has ended and its counters are final: add what only the run could tell (to ``labels``)."""

    @abstractmethod
    def prepare(self) -> None: ...

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def snapshot(self) -> Snapshot: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True once every worker has finished."""

    @abstractmethod
    def close(self) -> None: ...

    def environment(self) -> EngineEnvironment:
        """What the engine knows about the path it measured (I/O engine, cuFile mode, GPUs)."""
        return {}

    def thread_ids(self) -> list[int]:
        """Kernel thread ids of the workers, so their CPU can be told from the rest of the process."""
        return []


@dataclass(frozen=True)
class LatencySummary:
    min: float
    mean: float
    p50: float
    p90: float
    p99: float
    p999: float
    max: float


@dataclass(frozen=True)
class Sample:
    """One sampling interval. Rates are over the interval; ``total_*`` are since the start."""

    t: float  # seconds since the timed region began, at the end of the interval
    dt: float
    bytes: int
    ops: int
    read_bytes: int
    write_bytes: int
    throughput_gib_s: float
    throughput_mb_s: float
    iops: float
    latency_us: LatencySummary
    cpu_usr_pct: float  # this process, percent of one core
    cpu_sys_pct: float
    sys_usr_pct: float  # whole system, percent of all cores
    sys_sys_pct: float
    per_core_pct: tuple[float, ...]
    total_bytes: int
    total_ops: int
    worker_bytes: tuple[int, ...]
    workers_done: int
    gpu: tuple[GpuReading, ...] = ()  # per GPU telemetry (utilisation, memory, PCIe RX/TX), when sampled
    engine_usr_pct: float = float("nan")  # the engine's worker threads alone, percent of one core
    engine_sys_pct: float = float("nan")


@dataclass
class WorkerResult:
    worker: int
    bytes: int
    ops: int
    seconds: float
    throughput_mib_s: float
    gpu: int | None = None


@dataclass
class DoneTotals:
    """elbencho's first-done / last-done: all workers' totals when the first (last) one finished."""

    seconds: float
    bytes: int
    ops: int

    @property
    def throughput_mib_s(self) -> float:
        return self.bytes / (1 << 20) / self.seconds if self.seconds > 0 else 0.0

    @property
    def iops(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0


@dataclass
class RunResult:
    """Everything one run measured: what exporters, comparisons and profiles consume.

    A type of its own beside its record (``records.Run``, made by ``export.result_to_record``) because it holds
    what the file cannot: the C core's latency histogram as its bucket array (subtracted per interval, merged over
    workers and hosts), every sample, and the spec as ``RunSpec`` checked it."""

    spec: RunSpec
    status: str  # "ok", "interrupted", "failed"
    bytes: int
    ops: int
    read_bytes: int
    write_bytes: int
    read_ops: int
    write_ops: int
    seconds: float
    latency_us: LatencySummary
    read_latency_us: LatencySummary | None
    write_latency_us: LatencySummary | None
    cpu: dict[str, float]
    workers: list[WorkerResult]
    first_done: DoneTotals | None
    last_done: DoneTotals | None
    environment: RunEnvironment
    labels: list[str]
    samples: list[Sample] = field(default_factory=list)
    error: str | None = None
    source: str = "xferscope"
    histogram: Histogram | None = None
    gpus: dict[int, dict[str, float]] = field(default_factory=dict)
    #: a run over several hosts (``--mpi``): this result is the aggregate, and here is one result per host
    hosts: list[RunResult] = field(default_factory=list)
    #: what else explains ``error``: the last lines the engine's process wrote, cuFile's log
    error_detail: list[str] = field(default_factory=list)
    #: the run's fixed cost in seconds, outside its timed region: ``setup`` (from the command's start of the run
    #: to its first I/O: the engine's process, the path's set-up, files created) and ``teardown`` (from its last
    #: I/O to the run closed: its files removed, its process ended or kept for the next run of the command);
    #: ``process_step``: the files planned, the engine's process started or taken from the pool, and the path checked; the set-up
    #: steps the engine's process timed (``files_step``: planned and created, ``path_step``:
    #: the path's own set-up, ``telemetry_step``: GPU telemetry opened, ``start_step``: the engine started,
    #: ``environment_step``: the run's environment gathered);
    #: None where not measured (imports, old files)
    fixed_cost_s: dict[str, float] | None = None

    @property
    def incomplete(self) -> bool:
        """The timed region did not run its course (stopped, failed, or its process died): these are the
        figures measured until then."""
        return self.status != "ok"

    @property
    def path(self) -> str:
        return self.spec.path

    @classmethod
    def totals_only(
        cls,
        spec: RunSpec,
        status: str,
        *,
        bytes: int,
        ops: int,
        read_bytes: int,
        write_bytes: int,
        seconds: float,
        **more,
    ) -> RunResult:
        """A result of which only the totals are known (a live snapshot, a stand-in): no latency, CPU or
        workers."""
        nan = math.nan
        return cls(
            spec=spec,
            status=status,
            bytes=bytes,
            ops=ops,
            read_bytes=read_bytes,
            write_bytes=write_bytes,
            read_ops=more.pop("read_ops", 0),
            write_ops=more.pop("write_ops", 0),
            seconds=seconds,
            latency_us=LatencySummary(nan, nan, nan, nan, nan, nan, nan),
            read_latency_us=None,
            write_latency_us=None,
            cpu={},
            workers=[],
            first_done=None,
            last_done=None,
            environment={},
            labels=more.pop("labels", []),
            **more,
        )

    @property
    def throughput_gib_s(self) -> float:
        return self.bytes / (1 << 30) / self.seconds if self.seconds > 0 else 0.0

    @property
    def throughput_mib_s(self) -> float:
        return self.bytes / (1 << 20) / self.seconds if self.seconds > 0 else 0.0

    @property
    def throughput_mb_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    @property
    def iops(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_seconds_per_gib(self) -> float:
        """The path's CPU time per GiB: the engine process's, less xferscope's own sampling threads where they
        were measured (``telemetry_cpu_seconds``)."""
        gib = self.bytes / (1 << 30)
        cpu_s = self.cpu.get("cpu_seconds")  # absent where CPU was not measured (some imports)
        if cpu_s is None or gib <= 0:
            return float("nan")
        return (cpu_s - (self.cpu.get("telemetry_cpu_seconds") or 0.0)) / gib
