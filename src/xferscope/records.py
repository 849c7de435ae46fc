"""The published shape of xferscope's result files: one msgspec ``Struct`` per kind, with its JSON Schema.

Kinds: ``run`` (one run's summary, `run --json`, and each entry of a file's ``results``), ``comparison``
(`compare --json`), ``sweep`` (`replay --results`), ``saturation`` (`saturate --json`) and ``mem`` (`mem --json`).
The workloads' records (train, kvcache, load, checkpoint) are msgspec ``Struct``s of their own in ``xferscope.workloads``.

Every file written carries ``schema_version`` (``SCHEMA_VERSION``). A file of an earlier version has none and
reads as version 0: the fields these types require were there from the start, and every later one is optional.
Unknown fields are allowed (a newer file opens in an older reader). ``check`` validates a parsed file against its
kind before any reader looks at it: a damaged or foreign file is one line naming the field and what was expected
(msgspec's path, ``$.results[0].bytes``); ``as_run``, ``as_saturation``, ``as_mem`` and ``as_sweep`` give the typed
record itself, which the readers convert from. Writers build these types and write them with ``json_text`` (one
encoder: NaN and infinities as null), so a field written is a field the schema publishes and every reader accepts.
"""

from __future__ import annotations

import numbers
from typing import Annotated, Any, TypedDict, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from xferscope.errors import FormatError

#: the version of the files this xferscope writes (0: files written before versions were recorded)
SCHEMA_VERSION = 1
#: the ``schema`` names of the kinds that carry one (every run, a sweep's file, a saturation's)
RUN_SCHEMA, SWEEP_SCHEMA, SATURATION_SCHEMA = "xferscope.result/1", "xferscope.sweep/1", "xferscope.saturate/1"

Number = float | None
T = TypeVar("T")


class GpuReading(TypedDict, total=False):
    """One GPU as NVML (and sysfs) reported it: what does not change during a run, then one reading of what moves,
    and the copy ceiling measured this boot; a key is absent where it was not given."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    numa_node: int  # -1: the kernel does not know
    local_cpus: str  # the kernel's cpulist text
    link_gen_max: int
    link_width_max: int
    mem_total_mib: float
    mem_used_mib: float
    util_pct: float
    pcie_rx_mb_s: float
    pcie_tx_mb_s: float
    sm_clock_mhz: float
    link_gen: int
    link_width: int
    link_ceiling_h2d_gb_s: float
    link_ceiling_d2h_gb_s: float


class Record(msgspec.Struct, kw_only=True):
    """What every result file carries at its top."""

    schema_version: Annotated[
        int,
        msgspec.Meta(
            ge=0,
            description=f"the file's version: {SCHEMA_VERSION} from this xferscope; absent (0) in files written "
            "before versions were recorded",
        ),
    ] = 0


class GpuEntry(TypedDict, total=False):
    """A GPU a run used: its index, name, and the host<->GPU link ceiling measured this boot."""

    index: int
    name: str
    link_ceiling_h2d_gb_s: float
    link_ceiling_d2h_gb_s: float


class EngineEnvironment(TypedDict, total=False):
    """What an engine knows about the path it measured: its I/O engine and request shape, where its buffers
    were, CUDA's and cuFile's versions and modes, the GPUs, and the choices the bounce paths made."""

    io_engine: str
    direct_io: bool
    io_mode: str
    queue_depth: int
    split: int
    sub_requests_in_flight_per_worker: int
    host_buffers: str
    host_buffers_huge: bool
    cuda_driver: str | None
    cuda_python: str | None
    gpus: list[GpuEntry]
    pinned_buffers_placed_on: str
    pinned_buffers: str
    pinned_buffers_fallback: str
    pinned_buffers_per_worker: int
    blocks_per_copy: int
    read_buffers_per_worker: list[int]
    reads_on_one_buffer: list[bool]
    trial_us_a_block: list[dict[str, float | None]]
    cufile_version: str | None
    cufile_library: str | None
    cufile_mode: str
    cufile_mode_reason: str
    page_cache_probe: dict[str, bool | None]
    kvikio: dict[str, str]


class RankRow(TypedDict, total=False):
    """One rank of a run over several hosts, as it measured itself (``RunEnvironment["cluster"]["per_rank"]``)."""

    rank: int
    host: str
    local_rank: int
    status: str
    error: str | None
    bytes: int
    ops: int
    seconds: float
    throughput_mib_s: float
    first_done_s: float | None
    workers: int | None
    gpus: list[int] | None
    cpus: list[int] | None
    target: str | None
    latency_histogram_ns: dict[str, int]


class ClusterFacts(TypedDict, total=False):
    """What a run over several hosts (``--mpi``) adds to its environment: its scope ("all", or one "host"), the
    launcher and MPI library, its ranks and hosts, workers, the slowest host and a row per rank."""

    scope: str
    launcher: str | None
    mpi: str | None
    ranks: int
    hosts: list[str]
    workers_per_rank: int
    workers_total: int
    slowest_host: str | None
    per_rank: list[RankRow]


class RunEnvironment(EngineEnvironment, total=False):
    """Where a run ran: the host and its software, the target's filesystem, what the engine knows of its path, a
    run over several hosts' cluster, and for an imported run the tool, its command and its own words."""

    host: str
    kernel: str
    os: str
    python: str
    cpu_count: int | None
    cpu_model: str | None
    xferscope: str
    target: str
    filesystem: str
    mountpoint: str
    device: str
    logical_block_size: int
    dataset_bytes: int
    source: str
    resident_before: float | None
    resident_after: float | None
    cluster: ClusterFacts
    imported_from: str
    command: str
    fio_version: str | None
    jobname: str | None
    fio_options: dict[str, str]
    time: str | None
    elbencho_version: str
    iso_date: str
    path_type: str
    gdsio_line: str
    gdsio_throughput_gib_s: float


class WorkloadEnvironment(EngineEnvironment, total=False):
    """What a workload's engine process knows about its run: the engine's keys (the GPUs, CUDA's versions), the
    workload's own (its batch buffers, a checkpoint's layout and request size, where checkpoints were kept) and,
    where the process died, its last lines."""

    batch_buffer_bytes: int
    batch_buffers_per_accelerator: int
    checkpoint_layout: str
    request_bytes: int
    kept_in: str
    engine_last_words: list[str]
    library: str  # a library's path: its package and version ("torch 2.11.0")
    loader_settings: dict[str, str]  # train --path dataloader: the DataLoader's settings, as it was given them


# ------------------------------------------------------------------------- run


class Latency(msgspec.Struct, kw_only=True):
    """Latency in microseconds (null where the run measured none)."""

    min: Number = None
    mean: Number = None
    p50: Number = None
    p90: Number = None
    p99: Number = None
    p999: Number = None
    max: Number = None


class DonePoint(msgspec.Struct, kw_only=True):
    """The run's figures when its first (or last) worker finished its share."""

    seconds: float
    bytes: int
    ops: int
    throughput_mib_s: Number = None
    iops: Number = None


class Worker(msgspec.Struct, kw_only=True):
    worker: int
    bytes: int
    ops: int
    seconds: float
    throughput_mib_s: Number = None
    gpu: int | None = None


class RunSample(msgspec.Struct, kw_only=True):
    """One sample of the time series (``--json`` of `run`, not `--format json`): rates over the interval."""

    t: float
    dt: float
    bytes: int
    ops: int
    read_bytes: int = 0
    write_bytes: int = 0
    throughput_gib_s: Number = None
    iops: Number = None
    latency_us: Latency | None = None
    cpu_usr_pct: Number = None
    cpu_sys_pct: Number = None
    sys_usr_pct: Number = None
    sys_sys_pct: Number = None
    per_core_pct: list[Number] = []
    workers_done: int = 0
    gpu: list[GpuReading] = []


class SaturatePlace(msgspec.Struct, kw_only=True):
    """Where a run of `saturate --json` belongs: its search (``series``) and point, or its own-ceiling run."""

    series: int
    workers: int | None = None
    iodepth: int | None = None
    own_ceiling: bool = False
    cpus_allowed: int | None = None


class Run(Record, kw_only=True):
    """One run's summary (`run --json`; an entry of ``results`` in every other kind)."""

    schema: str = RUN_SCHEMA
    label: str = ""
    path: str
    xfer_type: str | None = None
    io: str
    rwmix: int | None = None
    block_size: int
    workers: int
    iodepth: int
    file_size: int | None = None
    gpus: list[int] = []
    status: str = "ok"
    incomplete: bool = False
    error: str | None = None
    source: str = "xferscope"
    bytes: int
    ops: int
    read_bytes: int = 0
    write_bytes: int = 0
    read_ops: int = 0
    write_ops: int = 0
    seconds: float
    throughput_gib_s: Number = None
    throughput_mib_s: Number = None
    throughput_mb_s: Number = None
    iops: Number = None
    latency_us: Latency | None = None
    read_latency_us: Latency | None = None
    write_latency_us: Latency | None = None
    cpu: dict[str, float | list[float] | None] = {}
    cpu_s_per_gib: Number = None
    first_done: DonePoint | None = None
    last_done: DonePoint | None = None
    per_worker: list[Worker] = []
    per_gpu: dict[str, dict[str, float]] = {}
    labels: list[str] = []
    environment: RunEnvironment = {}
    spec: dict[str, Any] = {}
    fixed_cost_s: dict[str, float] | None = None
    latency_histogram_ns: dict[str, int] | None = None
    error_detail: list[str] = []
    #: the time series: in files (``--json``), not on stdout (``--format json``)
    samples: list[RunSample] | UnsetType = UNSET
    hosts: list[Run] = []
    #: in `saturate --json` only
    saturate: SaturatePlace | UnsetType = UNSET


# ------------------------------------------------------------------ comparison


class Spread(msgspec.Struct, kw_only=True):
    """A figure over the rounds measured: median, range, and how many."""

    median: Number = None
    min: Number = None
    max: Number = None
    n: int | None = None


class PairedRatio(msgspec.Struct, kw_only=True):
    """A ratio paired round by round against a baseline: its median, interval and range, and the verdict."""

    verdict: str | None = None
    ratio: Number = None
    interval_low: Number = None
    interval_high: Number = None
    interval_coverage: Number = None
    ratio_min: Number = None
    ratio_max: Number = None


class ComparedPath(PairedRatio, kw_only=True):
    """One path of a comparison: its throughput in each round, its figures over the rounds and, against the
    baseline, the paired ratio, its interval and the verdict."""

    label: str
    path: str
    rounds: list[Number]
    throughput_mib_s: Spread | None = None
    iops: Spread | None = None
    lat_mean_us: Spread | None = None
    lat_p99_us: Spread | None = None
    cpu_usr_pct: Spread | None = None
    cpu_sys_pct: Spread | None = None
    cpu_s_per_gib: Spread | None = None
    baseline: bool = False
    verdict_text: str | None = None
    paired_rounds: int = 0


class RoundRun(msgspec.Struct, kw_only=True):
    """One run where it ran: its round and place in it (from 1), and its result's place in ``results``."""

    round: int
    position: int
    label: str
    status: str
    throughput_mib_s: Number = None
    files: list[list[Any]] = []
    result: int | None = None


class ComparisonSummary(msgspec.Struct, kw_only=True):
    rounds: int
    rounds_done: int | None = None
    rounds_mode: str = "fixed"
    max_rounds: int | None = None
    #: why each round past the first ones was added (``--rounds auto``)
    rounds_added: list[str] = []
    baseline: str
    order: list[list[str]]
    rule: str = ""
    #: the verdict rule's margin m (``--margin``): same within 1 ± m; faster/slower beyond 1 ± M(n) >= m
    margin: float = 0.05
    drift: str | None = None
    page_cache: str | None = None
    page_cache_dropped: bool | None = None
    #: the lines printed under the table: the rule, how to settle an undecided verdict, drift, what the buffers'
    #: memory costs a read, their pages, the page cache
    notes: list[str] = []
    paths: list[ComparedPath]
    runs: list[RoundRun] = []


class Comparison(Record, kw_only=True):
    """`compare --json`: the rounds, each path's figures and verdict, and every run in the order they ran."""

    comparison: ComparisonSummary
    results: list[Run] = []


# ------------------------------------------------------------------------ sweep


class MemRow(TypedDict, total=False):
    """A memory sweep point's row: one traffic, stride and delay (and where it measured: the chase's locality, the
    curve's working set, the matrix cell) with statistics of each figure over the repetitions."""

    traffic: str | None
    stride: int | None
    delay: int | None
    backend: str | None
    locality: str | None
    size_bytes: int | None
    cpu_node: int | None
    mem_node: int | None
    latency_ns: dict[str, float]
    bandwidth_mb_s: dict[str, float]
    read_mb_s: dict[str, float]
    write_mb_s: dict[str, float]


class PointIdentity(TypedDict, total=False):
    """What a sweep's point measures, the key of its resume and of ``--against``: an I/O point's path, pattern,
    request shape, GPUs and buffers (in the order of ``profiles.fields.IO_IDENTITY``); a memory point's mode,
    traffic, strides, backend, locality and pages."""

    path: str
    io: str
    block_size: int
    workers: int
    iodepth: int
    rwmix: int
    gpus: list[int]
    buffered: bool
    source: str
    register_buffers: bool
    huge_pages: bool
    split: int | None
    mode: str
    traffic: list[str]
    stride: list[int]
    backend: str
    locality: str | None
    pages: str | None


class SweepPoint(msgspec.Struct, kw_only=True):
    """One point of a profile's grid: its parameters, every repetition, and their statistics."""

    index: int
    key: str
    label: str = ""
    status: str = ""
    reason: str | None = None
    params: dict[str, Any] = {}
    identity: PointIdentity = {}
    repetitions_done: int = 0
    #: an I/O sweep's statistics over the repetitions
    stats: dict[str, Any] | UnsetType = UNSET
    #: a memory sweep's rows
    rows: list[MemRow] | UnsetType = UNSET
    repetitions: list[dict[str, Any]] = []


class Sweep(Record, kw_only=True):
    """`replay --results`: a profile's points with every repetition, kept across invocations."""

    schema: str = SWEEP_SCHEMA
    profile: dict[str, Any]
    kind: str = "io"
    created: str | None = None
    updated: str | None = None
    environment: SweepEnvironment = {}
    points: list[SweepPoint]
    #: an I/O sweep's median repetition of each point
    results: list[Run] | UnsetType = UNSET


# ------------------------------------------------------------------- saturation


class Shape(msgspec.Struct, kw_only=True):
    """How much is in flight: ``workers`` threads with ``iodepth`` I/Os each."""

    workers: int
    iodepth: int
    concurrency: int | None = None


class SaturationPoint(Shape, kw_only=True):
    stage: str | None = None
    throughput_gib_s: list[Number] = []
    median_gib_s: Number = None
    min_gib_s: Number = None
    max_gib_s: Number = None
    #: where its runs stand in the file's ``results``
    results: list[int] = []


class PointComparison(PairedRatio, kw_only=True):
    """Two points of a search told apart (or not) by the verdict rule."""

    baseline: Shape
    other: Shape
    stage: str = ""
    rounds: int
    margin: Number = None
    equivalence: Number = None
    told_apart: bool | None = None
    gain: bool | None = None


class CeilingCheck(msgspec.Struct, kw_only=True):
    ceiling: str
    text: str
    binds: bool | None = None


class Bottleneck(msgspec.Struct, kw_only=True):
    """Which ceiling binds the plateau, and each ceiling checked."""

    kind: str
    detail: str = ""
    verdict: str
    checks: list[CeilingCheck] = []
    advice: list[str] = []


class OwnCeiling(msgspec.Struct, kw_only=True):
    """A path bound by its own overhead, read again from the page cache: its rate and its run."""

    gib_s: Number = None
    note: str | None = None
    result: int | None = None


class SaturationSeries(msgspec.Struct, kw_only=True):
    """One search: a path at one block size."""

    path: str
    block_size: int
    gpus: list[int] | None = None
    role: str = "measured"
    label: str | None = None
    grid_points: int | None = None
    points_measured: int | None = None
    share_of_grid: Number = None
    runs: int | None = None
    limit: str | None = None
    stopped: str | None = None
    error: str | None = None
    unsaturated: list[Any] = []
    knee: Shape | None = None
    plateau: Shape | None = None
    #: from the knee on, the points on the plateau: "flat from 32 in flight: any concurrency ... gives 2.2-2.4 GiB/s"
    flat: str | None = None
    figures: dict[str, Any] | None = None
    evidence: dict[str, Any] | None = None
    bottleneck: Bottleneck | None = None
    verdict_line: str | None = None
    own_ceiling: OwnCeiling | None = None
    points: list[SaturationPoint] = []
    comparisons: list[PointComparison] = []


class SaturationPlan(msgspec.Struct, kw_only=True):
    paths: list[str]
    block_sizes: list[int]
    gpu_sets: list[list[int]] = msgspec.field(default_factory=lambda: [[0]])
    io: str | None = None
    max_workers: int
    max_qd: int
    min_rounds: int | None = None
    max_rounds: int | None = None
    max_points: int | None = None
    margin: Number = None
    storage: str | None = None
    duration: Number = None
    file_size: int | None = None
    spec: dict[str, Any] = {}


class Saturation(Record, kw_only=True):
    """`saturate --json`: the plan, each search's points, knee, plateau and bottleneck, and every run."""

    schema: str = SATURATION_SCHEMA
    plan: SaturationPlan
    rules: dict[str, str] = {}
    stopped: str | None = None
    storage_source: str | None = None
    storage: dict[str, list[Any]] | None = None
    environment: RunEnvironment = {}
    series: list[SaturationSeries]
    results: list[Run] = []


# ---------------------------------------------------------------- memory sweep


class MemPoint(msgspec.Struct, kw_only=True):
    """One point: a delay's latency and bandwidth, an idle latency, a cache-curve point or a matrix cell."""

    delay: int | None = None
    latency_ns: Number = None
    latency_min_ns: Number = None
    latency_max_ns: Number = None
    bandwidth_mb_s: Number = None
    read_mb_s: Number = None
    write_mb_s: Number = None
    traffic: str | None = None
    stride: int | None = None
    backend: str | None = None
    ns_per_delay_iter: Number = None
    windows: int = 0
    windows_short: int = 0
    locality: str | None = None
    locality_bytes: int | None = None
    size_bytes: int | None = None
    cpu_node: int | None = None
    mem_node: int | None = None


class CacheSize(TypedDict):
    """A cache level as sysfs gives it (a memory sweep's ``environment["caches"]``)."""

    name: str
    size: int


class Plateau(TypedDict):
    """A plateau of the cache-level curve, found in the measurements: the cache level that holds its largest
    working set (or ``memory``), its working sets, their median latency, whether it rises above the plateau below
    (None for the first) and whether it ends well before its level's size."""

    level: str
    from_bytes: int
    to_bytes: int
    points: int
    latency_ns: float
    rises: bool | None
    ends_early: bool


class NumaMatrix(TypedDict, total=False):
    """A memory sweep's NUMA matrix: its nodes, and latency and bandwidth [CPU node][memory node] (None where a
    cell was not measured; each table only where any cell was)."""

    cpu_nodes: list[int]
    mem_nodes: list[int]
    latency_ns: list[list[float | None]]
    bandwidth_mb_s: list[list[float | None]]


class NumaNodeFacts(TypedDict):
    """A NUMA node as a memory sweep found it: its number, its CPUs (a list as ``0-3,8``) and whether it holds
    memory."""

    node: int
    cpus: str
    memory: bool


class MemEnvironment(TypedDict, total=False):
    """Where a memory sweep ran: the CPU and its caches, the pages, CPUs and buffers the plan chose, its timing
    windows and delay calibration; for Intel MLC, mlc's path, commands, version and buffer line."""

    cpu_model: str | None
    cpus_allowed: str
    kernel: str
    llc_bytes: int | None
    caches: list[CacheSize]
    thp_mode: str | None
    pages: str | None
    locality: str | None
    latency_cpu: int | None
    load_cpus: str
    load_threads: int
    chase_bytes: int
    load_bytes_per_buffer: int
    buffers_per_load_thread: int
    warmup_s: float
    window_s: float
    windows: int
    ns_per_delay_iter: float
    numa_nodes: list[NumaNodeFacts]
    sysfs: str
    curve_sizes: list[int]
    source: str
    mlc_path: str
    mlc_commands: list[str]
    mlc_command_line: str
    mlc_version: str
    mlc_buffer: str


class SweepEnvironment(RunEnvironment, MemEnvironment, total=False):
    """A sweep's environment: an I/O sweep's is its runs', a memory sweep's is its sweep's."""


class MemSweep(Record, kw_only=True):
    """`mem --json` (and `import mlc --json`): latency against bandwidth per delay, or a mode's table."""

    backend: str = "builtin"
    mode: str | None
    cancelled: bool = False
    incomplete: bool = False
    error: str | None = None
    idle_latency_ns: Number = None
    idle_locality: str | None = None
    whole_idle_latency_ns: Number = None
    pages: str | None = None
    pages_obtained: dict[str, float] = {}
    thp_coverage: Number = None
    matrix: NumaMatrix | None = None
    cache_levels: list[Plateau] | None = None
    notes: list[str] = []
    warnings: list[str] = []
    source: str | None = None
    spec: dict[str, Any] | None = None
    environment: MemEnvironment = {}
    points: list[MemPoint]


#: kind -> (record type, what it is, in words)
KINDS: dict[str, tuple[type[Record], str]] = {
    "run": (Run, "a run's result (run --json)"),
    "comparison": (Comparison, "a comparison (compare --json)"),
    "sweep": (Sweep, "a sweep results file (replay --results)"),
    "saturation": (Saturation, "a saturation (saturate --json)"),
    "mem": (MemSweep, "a memory sweep (mem --json)"),
}


def _typed(data: Any, record: type[T], what: str, path: str, at: str = "$") -> T:
    """``data`` converted to ``record``; FormatError in one line naming the field (its place under ``at``)."""
    try:
        return msgspec.convert(data, type=record)
    except msgspec.ValidationError as exc:
        text = str(exc)
        where = text.replace("`$", f"`{at}", 1) if "`$" in text else f"{text} - at `{at}`"
        raise FormatError(path, None, f"not {what} xferscope can read: {where}") from None


def _check_version(data: Any, path: str) -> None:
    version = data.get("schema_version", 0) if isinstance(data, dict) else 0
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise FormatError(
            path,
            None,
            f"written by a newer xferscope (schema_version {version}; this one reads up to {SCHEMA_VERSION})",
        )


def check(kind: str, data: Any, path: str) -> Any:
    """``data`` (a parsed file) validated as ``kind``; FormatError in one line naming the field otherwise."""
    record, what = KINDS[kind]
    _typed(data, record, what, path)
    _check_version(data, path)
    return data


def _as(record: type[T], data: Any, path: str, at: str = "$") -> T:
    """``data`` (parsed) as a typed ``record`` of its kind; FormatError in one line naming the field otherwise."""
    _check_version(data, path)
    what = next(words for kind_type, words in KINDS.values() if kind_type is record)
    return _typed(data, record, what, path, at)


def as_run(data: Any, path: str, at: str = "$") -> Run:
    """One run's summary, typed."""
    return _as(Run, data, path, at)


def as_saturation(data: Any, path: str) -> Saturation:
    """A `saturate --json` file, typed."""
    return _as(Saturation, data, path)


def as_mem(data: Any, path: str) -> MemSweep:
    """One `mem --json` result, typed."""
    return _as(MemSweep, data, path)


def as_sweep(data: Any, path: str) -> Sweep:
    """A `replay --results` file, typed."""
    return _as(Sweep, data, path)


def runs_of(data: Any, path: str) -> list[Run]:
    """The runs a parsed file holds, typed: one run, a list of runs, ``{"results": [...]}``, or any kind's
    ``results`` (the whole file validated as its kind first). Each run is converted once."""
    if isinstance(data, list):
        return [as_run(item, path, f"$[{i}]") for i, item in enumerate(data)]
    kind = kind_of(data)
    if kind == "run" and isinstance(data, dict) and "path" not in data and isinstance(data.get("results"), list):
        return [as_run(item, path, f"$.results[{i}]") for i, item in enumerate(data["results"])]
    if kind == "run":
        return [as_run(data, path)]
    record, what = KINDS[kind]
    _check_version(data, path)
    return list(getattr(_typed(data, record, what, path), "results", None) or [])  # UNSET or absent: none


def kind_of(data: Any) -> str:
    """Which kind a parsed file is, from the fields that only that kind has (``run`` when none)."""
    if isinstance(data, dict):
        schema = data.get("schema")
        if schema == SWEEP_SCHEMA:
            return "sweep"
        if schema == SATURATION_SCHEMA:
            return "saturation"
        if "comparison" in data:
            return "comparison"
        if "points" in data and "mode" in data:
            return "mem"
    return "run"


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a kind."""
    return msgspec.json.schema(KINDS[kind][0])


# ----------------------------------------------------------------------- writing


def same_fields(source: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """``{name: source.name}`` for each of ``names``: the fields a record and the type it is written from (or
    read into) hold alike, listed once for both directions."""
    return {name: getattr(source, name) for name in names}


def _plain(value: Any) -> Any:
    """What msgspec does not write itself, as the plain number it is: numpy scalars, subclasses of int and float."""
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    raise NotImplementedError(f"cannot write a {type(value).__name__} as JSON")


_ENCODER = msgspec.json.Encoder(enc_hook=_plain)


def json_text(value: Any) -> str:
    """A record (or plain data holding records) as its file holds it: indented, NaN and infinities as null
    (JSON has neither), text as UTF-8."""
    return msgspec.json.format(_ENCODER.encode(value), indent=2).decode() + "\n"


def as_data(value: Any) -> Any:
    """A record as plain dicts and lists, exactly as its file holds it (NaN as None)."""
    return msgspec.json.decode(_ENCODER.encode(value))
