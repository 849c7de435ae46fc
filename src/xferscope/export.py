"""RunResults to and from JSON and CSV: the summary, the time series, and tables of several runs.

The same keys and columns serve native runs, comparisons, replays and imports
(gdsio, fio, elbencho), so any of them can be read back and compared. Files are written through
``xferscope.safe_write`` (``-`` is stdout; a failure is ``NotWritten``, the previous version kept).

A run over several hosts (``--mpi``) is one aggregate result whose ``hosts``
holds one result per host: the JSON key ``"hosts"`` (read back into
``RunResult.hosts``), and in the CSV files rows whose ``host`` column is ``all``
for the aggregate and the host's name for each host (empty for one-host runs).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from typing import Any, cast

from xferscope import records
from xferscope.engines.base import DoneTotals, LatencySummary, RunResult, Sample, WorkerResult
from xferscope.errors import FormatError
from xferscope.safe_write import write_output
from xferscope.spec import SHAPE_FIELDS, RunSpec
from xferscope.stats import Histogram
from xferscope.telemetry.gpu import summed_over_gpus

SCHEMA = records.RUN_SCHEMA

SERIES_COLUMNS = [
    "time_s",
    "path",
    "io",
    "block_size",
    "workers",
    "bytes",
    "ops",
    "throughput_gib_s",
    "iops",
    "lat_mean_us",
    "lat_p99_us",
    "cpu_usr_pct",
    "cpu_sys_pct",
    "throughput_mb_s",
    "read_bytes",
    "write_bytes",
    "lat_p50_us",
    "lat_p90_us",
    "lat_p999_us",
    "lat_max_us",
    "sys_usr_pct",
    "sys_sys_pct",
    "workers_done",
    "gpu_util_pct",
    "gpu_mem_used_mib",
    "gpu_pcie_rx_mb_s",
    "gpu_pcie_tx_mb_s",
    "label",
    "host",
    "ranks",
    "status",
    "incomplete",
]

SUMMARY_COLUMNS = [
    "label",
    *SHAPE_FIELDS,
    "gpus",
    "bytes",
    "ops",
    "seconds",
    "throughput_gib_s",
    "throughput_mib_s",
    "throughput_mb_s",
    "iops",
    "lat_min_us",
    "lat_mean_us",
    "lat_p50_us",
    "lat_p90_us",
    "lat_p99_us",
    "lat_p999_us",
    "lat_max_us",
    "cpu_usr_pct",
    "cpu_sys_pct",
    "sys_usr_pct",
    "sys_sys_pct",
    "cpu_s_per_gib",
    "first_done_mib_s",
    "last_done_mib_s",
    "pcie_rx_mb_s",
    "pcie_tx_mb_s",
    "status",
    "io_mode",
    "labels",
    "source",
    "host",
    "ranks",
]


def _latency(s: LatencySummary | None) -> records.Latency | None:
    return records.Latency(**vars(s)) if s is not None else None


def _done_point(p: DoneTotals | None) -> records.DonePoint | None:
    if p is None:
        return None
    return records.DonePoint(
        seconds=p.seconds, bytes=p.bytes, ops=p.ops, throughput_mib_s=p.throughput_mib_s, iops=p.iops
    )


#: what a sample's record and the engines' sample hold alike, name for name
SAMPLE_FIELDS = (
    "t", "dt", "bytes", "ops", "read_bytes", "write_bytes", "throughput_gib_s", "iops",
    "cpu_usr_pct", "cpu_sys_pct", "sys_usr_pct", "sys_sys_pct", "workers_done",
)  # fmt: skip
#: what a run's record holds of its spec at the top, besides the spec itself
RUN_SPEC_FIELDS = ("path", "io", "block_size", "workers", "iodepth", "file_size")
#: what a run's record and the engines' result hold alike, name for name (written and read back as they are)
RUN_FIELDS = (
    "status", "error", "source", "bytes", "ops", "read_bytes", "write_bytes", "read_ops", "write_ops", "seconds",
)  # fmt: skip


def _sample(s: Sample) -> records.RunSample:
    return records.RunSample(
        **records.same_fields(s, SAMPLE_FIELDS),
        latency_us=_latency(s.latency_us),
        per_core_pct=list(s.per_core_pct),
        gpu=list(s.gpu),
    )


def result_to_record(r: RunResult, *, samples: bool = False) -> records.Run:
    """The summary of one run as its typed record (``records.Run``: the keys documented for ``run --json``); its
    time series with ``samples``."""
    spec = r.spec
    return records.Run(
        schema_version=records.SCHEMA_VERSION,
        label=spec.name,
        **records.same_fields(spec, RUN_SPEC_FIELDS),
        xfer_type=spec.xfer_type,
        rwmix=spec.read_pct,
        gpus=list(spec.gpus) if spec.uses_gpu else [],
        **records.same_fields(r, RUN_FIELDS),
        incomplete=r.incomplete,
        throughput_gib_s=r.throughput_gib_s,
        throughput_mib_s=r.throughput_mib_s,
        throughput_mb_s=r.throughput_mb_s,
        iops=r.iops,
        latency_us=_latency(r.latency_us),
        read_latency_us=_latency(r.read_latency_us),
        write_latency_us=_latency(r.write_latency_us),
        cpu=dict(r.cpu),
        cpu_s_per_gib=r.cpu_seconds_per_gib,
        first_done=_done_point(r.first_done),
        last_done=_done_point(r.last_done),
        per_worker=[records.Worker(**vars(w)) for w in r.workers],
        per_gpu={str(k): v for k, v in r.gpus.items()},
        labels=list(r.labels),
        environment=r.environment.copy(),
        spec=spec.to_dict(),
        fixed_cost_s=dict(r.fixed_cost_s) if r.fixed_cost_s is not None else None,
        latency_histogram_ns={str(k): v for k, v in r.histogram.to_sparse().items()}
        if r.histogram is not None
        else None,
        error_detail=list(r.error_detail),
        samples=[_sample(s) for s in r.samples] if samples else records.UNSET,
        hosts=[result_to_record(h, samples=samples) for h in r.hosts],
    )


def result_to_dict(r: RunResult, *, samples: bool = False) -> dict[str, Any]:
    """The summary of one run as plain data, exactly as its file holds it."""
    return records.as_data(result_to_record(r, samples=samples))


def _lat(rec: records.Latency | None) -> LatencySummary | None:
    return _lat_or_nan(rec) if rec is not None else None


def _lat_or_nan(rec: records.Latency | None) -> LatencySummary:
    """A summary with NaN where the file has no figure (or no latency at all)."""
    keys = ("min", "mean", "p50", "p90", "p99", "p999", "max")
    values = [getattr(rec, k) if rec is not None else None for k in keys]
    return LatencySummary(*[math.nan if v is None else float(v) for v in values])


def _done(rec: records.DonePoint | None) -> DoneTotals | None:
    return DoneTotals(rec.seconds, rec.bytes, rec.ops) if rec is not None else None


def result_from_record(rec: records.Run, where: str = "<json>") -> RunResult:
    """The engines' result type from a typed record (its spec checked as ``RunSpec`` checks it)."""
    spec_d = dict(rec.spec)
    for key in RUN_SPEC_FIELDS:
        if key not in spec_d and getattr(rec, key) is not None:
            spec_d[key] = getattr(rec, key)
    try:
        spec = RunSpec(**{k: v for k, v in spec_d.items() if k in RunSpec.field_names()})
    except (TypeError, ValueError) as exc:
        raise FormatError(where, None, f"not an xferscope result: its spec: {exc}") from None
    hist = cast("dict[int | str, int]", rec.latency_histogram_ns or {})  # bucket index -> count, keys as text
    cpu: dict[str, Any] = {k: v for k, v in rec.cpu.items() if v is not None}  # per_core_pct is a list
    return RunResult(
        spec=spec,
        **records.same_fields(rec, RUN_FIELDS),
        latency_us=_lat_or_nan(rec.latency_us),
        read_latency_us=_lat(rec.read_latency_us),
        write_latency_us=_lat(rec.write_latency_us),
        cpu=cpu,
        workers=[
            WorkerResult(w.worker, w.bytes, w.ops, w.seconds, w.throughput_mib_s or 0.0, w.gpu) for w in rec.per_worker
        ],
        first_done=_done(rec.first_done),
        last_done=_done(rec.last_done),
        environment=rec.environment,
        labels=list(rec.labels),
        samples=[],
        histogram=Histogram.from_sparse(hist) if hist else None,
        gpus={int(k): v for k, v in rec.per_gpu.items()},
        hosts=[result_from_record(h, where) for h in rec.hosts],
        error_detail=list(rec.error_detail),
        fixed_cost_s=dict(rec.fixed_cost_s) if rec.fixed_cost_s else None,
    )


def read_json(path: str) -> Any:
    """The JSON document in ``path``; FormatError names the file (and the line) when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise FormatError(path, None, "no such file") from None
    except json.JSONDecodeError as exc:
        raise FormatError(path, exc.lineno, f"not valid JSON: {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(path, None, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def load_results(path: str) -> list[RunResult]:
    """Results from a JSON file written by run/compare/replay/import/saturate (one object or a list)."""
    return [result_from_record(rec, path) for rec in records.runs_of(read_json(path), path)]


def write_json(path: str, payload: Any) -> None:
    """``payload`` as JSON to ``path`` through the safe writer (``-`` is stdout; NotWritten on failure)."""
    write_output(path, records.json_text(payload))


#: one cell of a CSV row
Cell = str | int | float | None


def cluster_columns(r: RunResult) -> dict[str, Cell]:
    """``host`` and ``ranks`` of a row: "all" for the aggregate of a run over several hosts, the host name
    for one of its hosts, empty for a run on one host."""
    cluster = r.environment.get("cluster")
    if not isinstance(cluster, dict):
        return {"host": "", "ranks": ""}
    host = "all" if cluster.get("scope") == "all" else r.environment.get("host", "")
    return {"host": host, "ranks": cluster.get("ranks", "")}


def with_hosts(results: Iterable[RunResult]) -> Iterable[RunResult]:
    """Each result, followed by its per-host results when it ran on several hosts."""
    for r in results:
        yield r
        yield from r.hosts


def summary_row(r: RunResult) -> dict[str, Cell]:
    lat = r.latency_us
    spec = r.spec
    return {
        "label": spec.name,
        **spec.shape(),
        "gpus": " ".join(map(str, spec.gpus)) if spec.uses_gpu else "",
        "bytes": r.bytes,
        "ops": r.ops,
        "seconds": r.seconds,
        "throughput_gib_s": r.throughput_gib_s,
        "throughput_mib_s": r.throughput_mib_s,
        "throughput_mb_s": r.throughput_mb_s,
        "iops": r.iops,
        "lat_min_us": lat.min,
        "lat_mean_us": lat.mean,
        "lat_p50_us": lat.p50,
        "lat_p90_us": lat.p90,
        "lat_p99_us": lat.p99,
        "lat_p999_us": lat.p999,
        "lat_max_us": lat.max,
        "cpu_usr_pct": r.cpu.get("usr_pct"),
        "cpu_sys_pct": r.cpu.get("sys_pct"),
        "sys_usr_pct": r.cpu.get("sys_usr_pct"),
        "sys_sys_pct": r.cpu.get("sys_sys_pct"),
        "cpu_s_per_gib": r.cpu_seconds_per_gib,
        "first_done_mib_s": r.first_done.throughput_mib_s if r.first_done else None,
        "last_done_mib_s": r.last_done.throughput_mib_s if r.last_done else None,
        "pcie_rx_mb_s": summed_over_gpus(r.gpus, "pcie_rx_mb_s"),
        "pcie_tx_mb_s": summed_over_gpus(r.gpus, "pcie_tx_mb_s"),
        "status": r.status,
        "io_mode": r.environment.get("io_mode", ""),
        "labels": "; ".join(r.labels),
        "source": r.source,
        **cluster_columns(r),
    }


def _fmt(v: Cell) -> str | int:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return v


def _csv_text(columns: list[str], rows: Iterable[dict[str, Cell]]) -> str:
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=columns)
    w.writeheader()
    for row in rows:
        w.writerow({k: _fmt(v) for k, v in row.items()})
    return buf.getvalue()


def summary_csv_text(results: Iterable[RunResult]) -> str:
    return _csv_text(SUMMARY_COLUMNS, (summary_row(r) for r in with_hosts(results)))


def write_summary_csv(path: str, results: Iterable[RunResult]) -> None:
    write_output(path, summary_csv_text(results))


def series_rows(r: RunResult) -> Iterable[dict[str, Cell]]:
    spec = r.spec
    where = cluster_columns(r)
    for s in r.samples:
        gpu = s.gpu or ()
        yield {
            "time_s": s.t,
            "path": spec.path,
            "io": spec.io,
            "block_size": spec.block_size,
            "workers": spec.workers,
            "bytes": s.bytes,
            "ops": s.ops,
            "throughput_gib_s": s.throughput_gib_s,
            "iops": s.iops,
            "lat_mean_us": s.latency_us.mean,
            "lat_p99_us": s.latency_us.p99,
            "cpu_usr_pct": s.cpu_usr_pct,
            "cpu_sys_pct": s.cpu_sys_pct,
            "throughput_mb_s": s.throughput_mb_s,
            "read_bytes": s.read_bytes,
            "write_bytes": s.write_bytes,
            "lat_p50_us": s.latency_us.p50,
            "lat_p90_us": s.latency_us.p90,
            "lat_p999_us": s.latency_us.p999,
            "lat_max_us": s.latency_us.max,
            "sys_usr_pct": s.sys_usr_pct,
            "sys_sys_pct": s.sys_sys_pct,
            "workers_done": s.workers_done,
            "gpu_util_pct": (sum(g.get("util_pct", 0) for g in gpu) / len(gpu)) if gpu else None,
            "gpu_mem_used_mib": sum(g.get("mem_used_mib", 0) for g in gpu) if gpu else None,
            "gpu_pcie_rx_mb_s": sum(g.get("pcie_rx_mb_s", 0) for g in gpu) if gpu else None,
            "gpu_pcie_tx_mb_s": sum(g.get("pcie_tx_mb_s", 0) for g in gpu) if gpu else None,
            "label": spec.name,
            **where,
            "status": r.status,
            "incomplete": "yes" if r.incomplete else "no",
        }


def series_csv_text(results: Iterable[RunResult]) -> str:
    return _csv_text(SERIES_COLUMNS, (row for r in with_hosts(results) for row in series_rows(r)))


def write_series_csv(path: str, results: Iterable[RunResult]) -> None:
    write_output(path, series_csv_text(results))
