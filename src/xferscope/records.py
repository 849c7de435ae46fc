"""The published shape of xferscope's result files: one msgspec ``Struct`` per kind, with its JSON Schema.

Kinds: ``run`` (one run's summary, `run --json`, and each entry of a file's ``results``), ``comparison``
(`compare --json`), ``sweep`` (`replay --results`), ``saturation`` (`saturate --json`) and ``mem`` (`mem --json`).
The workloads' records (train, kvcache, load) are msgspec ``Struct``s of their own in ``xferscope.workloads``.

Every file written carries ``schema_version`` (``SCHEMA_VERSION``). A file of an earlier version has none and
reads as version 0: the fields these types require were there from the start, and every later one is optional.
Unknown fields are allowed (a newer file opens in an older reader). ``check`` validates a parsed file against its
kind before any reader looks at it: a damaged or foreign file is one line naming the field and what was expected
(msgspec's path, ``$.results[0].bytes``).
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import msgspec

from xferscope.errors import FormatError

#: the version of the files this xferscope writes (0: files written before versions were recorded)
SCHEMA_VERSION = 1
#: the ``schema`` names of the kinds that carry one (every run, a sweep's file, a saturation's)
RUN_SCHEMA, SWEEP_SCHEMA, SATURATION_SCHEMA = "xferscope.result/1", "xferscope.sweep/1", "xferscope.saturate/1"

Number = float | None
T = TypeVar("T")


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
    """One sample of the time series (``--json`` of `run`, not `--format json`)."""

    t: float
    dt: float
    bytes: int
    ops: int
    throughput_gib_s: Number = None
    iops: Number = None
    latency_us: Latency | None = None


class Run(Record, kw_only=True):
    """One run's summary (`run --json`; an entry of ``results`` in every other kind)."""

    schema: str = RUN_SCHEMA
    label: str = ""
    path: str
    io: str
    block_size: int
    workers: int
    iodepth: int
    file_size: int | None = None
    status: str = "ok"
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
    iops: Number = None
    latency_us: Latency | None = None
    read_latency_us: Latency | None = None
    write_latency_us: Latency | None = None
    cpu: dict[str, float | list[float] | None] = {}
    cpu_s_per_gib: Number = None
    first_done: DonePoint | None = None
    last_done: DonePoint | None = None
    per_worker: list[Worker] = []
    per_gpu: dict[str, dict[str, Any]] = {}
    labels: list[str] = []
    environment: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    fixed_cost_s: dict[str, float] | None = None
    latency_histogram_ns: dict[str, int] | None = None
    error_detail: list[str] = []
    samples: list[RunSample] = []
    hosts: list[Run] = []


# ------------------------------------------------------------------ comparison


class Spread(msgspec.Struct, kw_only=True):
    median: Number = None
    min: Number = None
    max: Number = None


class ComparedPath(msgspec.Struct, kw_only=True):
    label: str
    path: str
    rounds: list[Number]
    throughput_mib_s: Spread | None = None
    baseline: bool = False
    ratio: Number = None
    verdict: str | None = None
    verdict_text: str | None = None
    interval_low: Number = None
    interval_high: Number = None


class RoundRun(msgspec.Struct, kw_only=True):
    round: int
    position: int
    label: str
    status: str
    throughput_mib_s: Number = None
    result: int | None = None


class ComparisonSummary(msgspec.Struct, kw_only=True):
    rounds: int
    baseline: str
    order: list[list[str]]
    rule: str = ""
    rounds_mode: str = "fixed"
    max_rounds: int | None = None
    rounds_added: list[dict[str, Any]] = []
    drift: str | None = None
    page_cache: str | None = None
    paths: list[ComparedPath]
    runs: list[RoundRun] = []


class Comparison(Record, kw_only=True):
    """`compare --json`: the rounds, each path's figures and verdict, and every run in the order they ran."""

    comparison: ComparisonSummary
    results: list[Run] = []


# ------------------------------------------------------------------------ sweep


class SweepPoint(msgspec.Struct, kw_only=True):
    index: int
    key: str
    label: str = ""
    status: str = ""
    reason: str | None = None
    params: dict[str, Any] = {}
    identity: dict[str, Any] = {}
    repetitions_done: int = 0
    stats: dict[str, Any] = {}
    repetitions: list[dict[str, Any]] = []


class Sweep(Record, kw_only=True):
    """`replay --results`: a profile's points with every repetition, kept across invocations."""

    schema: str
    profile: dict[str, Any]
    kind: str = "io"
    created: str | None = None
    updated: str | None = None
    environment: dict[str, Any] = {}
    points: list[SweepPoint]
    results: list[Run] = []


# ------------------------------------------------------------------- saturation


class SaturationPoint(msgspec.Struct, kw_only=True):
    workers: int
    iodepth: int
    concurrency: int | None = None
    stage: str | None = None
    throughput_gib_s: list[Number] = []
    results: list[int] = []


class SaturationSeries(msgspec.Struct, kw_only=True):
    path: str
    block_size: int
    gpus: list[int] | None = None
    role: str = "measured"
    label: str | None = None
    points: list[SaturationPoint] = []
    knee: dict[str, Any] | None = None
    plateau: dict[str, Any] | None = None
    bottleneck: dict[str, Any] | None = None


class Saturation(Record, kw_only=True):
    """`saturate --json`: the plan, each search's points, knee, plateau and bottleneck, and every run."""

    schema: str
    plan: dict[str, Any]
    stopped: str | None = None
    storage_source: str | None = None
    storage: dict[str, list[Any]] | None = None
    environment: dict[str, Any] = {}
    series: list[SaturationSeries]
    results: list[Run] = []


# ---------------------------------------------------------------- memory sweep


class MemPoint(msgspec.Struct, kw_only=True):
    delay: int | None = None
    latency_ns: Number = None
    bandwidth_mb_s: Number = None
    traffic: str | None = None
    stride: int | None = None
    backend: str | None = None


class MemSweep(Record, kw_only=True):
    """`mem --json` (and `import mlc --json`): latency against bandwidth per delay, or a mode's table."""

    backend: str = "builtin"
    mode: str | None
    cancelled: bool = False
    incomplete: bool = False
    error: str | None = None
    idle_latency_ns: Number = None
    spec: dict[str, Any] = {}
    environment: dict[str, Any] = {}
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


def as_run(data: Any, path: str, at: str = "$") -> Run:
    """``data`` (one run's summary, parsed) as a typed ``Run``; FormatError in one line naming the field otherwise."""
    _check_version(data, path)
    return _typed(data, Run, KINDS["run"][1], path, at)


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
    return list(getattr(_typed(data, record, what, path), "results", []))


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
