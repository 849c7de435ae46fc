"""fio ``--output-format=json`` into RunResults: one per job, or per group of jobs sharing a name.

Bandwidth and IOPS come from ``io_bytes``, ``total_ios`` and ``runtime``; latency
from ``clat_ns`` (min, mean, max and the 50/90/99/99.9 percentiles); CPU from
``usr_cpu``/``sys_cpu`` weighted by ``job_runtime``, as percent of one core like
xferscope's own figures. A job that ran both reads and writes keeps its per-direction
latencies; fio gives no percentiles of the two together, so those stay empty.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from xferscope.engines.base import LatencySummary, RunResult, WorkerResult
from xferscope.errors import FormatError
from xferscope.importers._result import checked_spec, imported_result, latency, read_text
from xferscope.units import parse_size

SOURCE = "fio"

RW_PATTERNS = {
    "read": "read",
    "write": "write",
    "randread": "randread",
    "randwrite": "randwrite",
    "rw": "rw",
    "readwrite": "rw",
    "randrw": "randrw",
}
PERCENTILE_KEYS = {"p50": "50.000000", "p90": "90.000000", "p99": "99.000000", "p999": "99.900000"}


def _direction_latency(section: dict[str, Any]) -> LatencySummary | None:
    clat = section.get("clat_ns") or {}
    if not section.get("total_ios") or not clat.get("N"):
        return None
    pct = clat.get("percentile") or {}
    values = {k: pct[v] / 1e3 for k, v in PERCENTILE_KEYS.items() if v in pct}
    return latency(min=clat["min"] / 1e3, mean=clat["mean"] / 1e3, max=clat["max"] / 1e3, **values)


def _merge(parts: list[tuple[LatencySummary | None, int]]) -> LatencySummary | None:
    """Several latency summaries as one: exact for min, mean and max; percentiles only when there is one part."""
    known = [(lat, n) for lat, n in parts if lat is not None and n]
    if not known:
        return None
    if len(known) == 1:
        return known[0][0]
    total = sum(n for _, n in known)
    return latency(
        min=min(lat.min for lat, _ in known),
        max=max(lat.max for lat, _ in known),
        mean=sum(lat.mean * n for lat, n in known) / total,
    )


def _options(data: dict[str, Any], job: dict[str, Any]) -> dict[str, str]:
    return {**(data.get("global options") or {}), **(job.get("job options") or {})}


def _path_of(options: dict[str, str]) -> tuple[str, list[int] | None]:
    engine = options.get("ioengine", "psync")
    gpus = options.get("gpu_dev_ids")
    gpu_list = [int(g) for g in re.split(r"[:,\s]+", gpus) if g.isdigit()] if gpus else None
    if engine == "libcufile":
        return ("bounce" if options.get("cuda_io") == "posix" else "cufile"), gpu_list
    return "host", None


def _job_spec(data: dict[str, Any], jobs: list[dict[str, Any]], where: str, line: int | None):
    options = _options(data, jobs[0])
    rw = options.get("rw", options.get("readwrite", "read")).split(":")[0]
    if rw not in RW_PATTERNS:
        raise FormatError(
            where, line, f"fio rw={rw} is not a pattern xferscope measures; known: {', '.join(RW_PATTERNS)}"
        )
    try:
        bs = parse_size(options.get("bs", options.get("blocksize", "4k")).split(",")[0])
    except ValueError as exc:
        raise FormatError(where, line, f"fio bs: {exc}") from None
    try:
        size = parse_size(options.get("size", "")) if options.get("size") else None
    except ValueError:  # a percentage such as size=50% says nothing in bytes
        size = None
    workers = len(jobs) if len(jobs) > 1 else int(options.get("numjobs", 1))
    mix = int(options["rwmixread"]) if "rwmixread" in options else 100 - int(options.get("rwmixwrite", 50))
    path, gpus = _path_of(options)
    fields: dict[str, Any] = dict(
        path=path,
        io=RW_PATTERNS[rw],
        block_size=bs,
        workers=workers,
        iodepth=int(options.get("iodepth", 1)),
        rwmix=mix,
        buffered=options.get("direct", "0") not in ("1", "true"),
    )
    if size:
        fields["file_size"] = max(size, bs)
    if gpus:
        fields["gpus"] = gpus
    return fields, options


def _result(data: dict[str, Any], jobs: list[dict[str, Any]], where: str, line: int | None) -> RunResult:
    fields, options = _job_spec(data, jobs, where, line)
    try:
        rd = [job["read"] for job in jobs]
        wr = [job["write"] for job in jobs]
        seconds = max(max(s["runtime"] for s in rd + wr), 0) / 1e3
        read_bytes = sum(int(s["io_bytes"]) for s in rd)
        write_bytes = sum(int(s["io_bytes"]) for s in wr)
        read_ops = sum(int(s["total_ios"]) for s in rd)
        write_ops = sum(int(s["total_ios"]) for s in wr)
        cpu_usr_s = sum(float(j["usr_cpu"]) * float(j["job_runtime"]) for j in jobs) / 1e5
        cpu_sys_s = sum(float(j["sys_cpu"]) * float(j["job_runtime"]) for j in jobs) / 1e5
    except (KeyError, TypeError, ValueError) as exc:
        raise FormatError(
            where,
            line,
            f"fio job lacks {exc} (expected read/write sections with io_bytes, "
            "total_ios, runtime, and usr_cpu/sys_cpu/job_runtime)",
        ) from None
    if seconds <= 0:
        raise FormatError(where, line, f"fio job {jobs[0].get('jobname')!r} has no runtime: it did no I/O")
    read_lat = _merge([(_direction_latency(s), int(s["total_ios"])) for s in rd])
    write_lat = _merge([(_direction_latency(s), int(s["total_ios"])) for s in wr])
    overall = _merge([(read_lat, read_ops), (write_lat, write_ops)]) or latency()
    fields["duration"] = seconds
    spec = checked_spec(where, line, **fields)
    gib = (read_bytes + write_bytes) / (1 << 30)
    cpu = {
        "usr_pct": cpu_usr_s / seconds * 100,
        "sys_pct": cpu_sys_s / seconds * 100,
        "cpu_seconds": cpu_usr_s + cpu_sys_s,
        "cpu_s_per_gib": (cpu_usr_s + cpu_sys_s) / gib if gib > 0 else math.nan,
    }
    workers = []
    for i, job in enumerate(jobs):
        nbytes = int(job["read"]["io_bytes"]) + int(job["write"]["io_bytes"])
        ops = int(job["read"]["total_ios"]) + int(job["write"]["total_ios"])
        job_s = max(job["read"]["runtime"], job["write"]["runtime"]) / 1e3
        workers.append(WorkerResult(i, nbytes, ops, job_s, nbytes / (1 << 20) / job_s if job_s > 0 else 0.0))
    errors = [int(j.get("error", 0)) for j in jobs if int(j.get("error", 0))]
    labels = [options.get("ioengine", "psync")]
    if fields.get("buffered"):
        labels.append("buffered")
    return imported_result(
        spec,
        source=SOURCE,
        seconds=seconds,
        read_bytes=read_bytes,
        write_bytes=write_bytes,
        read_ops=read_ops,
        write_ops=write_ops,
        latency_us=overall,
        read_latency_us=read_lat if read_ops and write_ops else None,
        write_latency_us=write_lat if read_ops and write_ops else None,
        cpu=cpu,
        workers=workers if len(jobs) > 1 else [],
        environment={
            "fio_version": data.get("fio version"),
            "jobname": jobs[0].get("jobname"),
            "fio_options": options,
            "time": data.get("time"),
        },
        labels=labels,
        error=f"fio reported error {errors[0]}" if errors else None,
    )


def parse_text(text: str, where: str) -> list[RunResult]:
    """Every job (jobs of one name and group together) in fio's JSON output; text before the JSON is skipped."""
    start = re.search(r"^\{", text, re.MULTILINE)
    if not start:
        raise FormatError(where, None, "not fio JSON output (run fio with --output-format=json)")
    skipped_lines = text.count("\n", 0, start.start())
    try:
        data = json.loads(text[start.start() :])
    except json.JSONDecodeError as exc:
        raise FormatError(where, exc.lineno + skipped_lines, f"not valid JSON: {exc.msg}") from None
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list) or not jobs:
        raise FormatError(where, skipped_lines + 1, "no 'jobs' list: not fio --output-format=json output")
    job_lines = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(r'"jobname"\s*:', text)]
    groups: dict[tuple[str, int], list[tuple[int, dict]]] = {}
    for index, job in enumerate(jobs):
        if not isinstance(job, dict) or "jobname" not in job:
            line = job_lines[index] if index < len(job_lines) else None
            raise FormatError(where, line, f"job {index + 1} has no jobname: not fio JSON output")
        try:
            groups.setdefault((job["jobname"], job.get("groupid", 0)), []).append((index, job))
        except TypeError:  # a list or an object where fio writes a name or a number
            line = job_lines[index] if index < len(job_lines) else None
            raise FormatError(where, line, f"job {index + 1}: its jobname or groupid is not what fio writes") from None
    results = []
    for (name, _), members in groups.items():
        first = members[0][0]
        line = job_lines[first] if first < len(job_lines) else None
        try:
            results.append(_result(data, [job for _, job in members], where, line))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, ZeroDivisionError) as exc:
            # a field holds what fio never writes there (a list for a number, null for an option, ...)
            raise FormatError(where, line, f"fio job {name!r}: a value is not what fio writes ({exc})") from None
    return results


def import_fio(path: str) -> list[RunResult]:
    return parse_text(read_text(path), path)
