"""What every importer shares: building a RunResult from another tool's figures, with its source marked."""

from __future__ import annotations

import math
from typing import Any

from xferscope.engines.base import DoneTotals, LatencySummary, RunResult, WorkerResult
from xferscope.errors import FormatError, SpecError
from xferscope.records import RunEnvironment
from xferscope.spec import RunSpec

NAN = math.nan


def latency(
    *,
    min: float = NAN,
    mean: float = NAN,
    p50: float = NAN,
    p90: float = NAN,
    p99: float = NAN,
    p999: float = NAN,
    max: float = NAN,
) -> LatencySummary:
    """Latency in microseconds; what the tool did not report stays NaN (written as null/empty)."""
    return LatencySummary(min=min, mean=mean, p50=p50, p90=p90, p99=p99, p999=p999, max=max)


def checked_spec(where: str, line: int | None, **fields: Any) -> RunSpec:
    """A RunSpec for what the tool ran; a field xferscope cannot represent is a FormatError at ``line``."""
    try:
        return RunSpec(**fields).validate()
    except SpecError as exc:
        raise FormatError(where, line, f"cannot represent this result: {exc}") from None


def imported_result(
    spec: RunSpec,
    *,
    source: str,
    seconds: float,
    read_bytes: int,
    write_bytes: int,
    read_ops: int,
    write_ops: int,
    latency_us: LatencySummary,
    read_latency_us: LatencySummary | None = None,
    write_latency_us: LatencySummary | None = None,
    cpu: dict[str, float] | None = None,
    workers: list[WorkerResult] | None = None,
    first_done: DoneTotals | None = None,
    last_done: DoneTotals | None = None,
    environment: RunEnvironment | None = None,
    labels: list[str] | None = None,
    error: str | None = None,
) -> RunResult:
    """A RunResult of figures another tool measured; ``error`` marks a run that tool reported as failed."""
    return RunResult(
        spec=spec,
        status="failed" if error else "ok",
        bytes=read_bytes + write_bytes,
        ops=read_ops + write_ops,
        read_bytes=read_bytes,
        write_bytes=write_bytes,
        read_ops=read_ops,
        write_ops=write_ops,
        seconds=seconds,
        latency_us=latency_us,
        read_latency_us=read_latency_us,
        write_latency_us=write_latency_us,
        cpu=dict(cpu or {}),
        workers=list(workers or []),
        first_done=first_done,
        last_done=last_done,
        environment={"imported_from": source, **(environment or {})},
        labels=list(labels or []),
        samples=[],
        error=error,
        source=source,
        histogram=None,
        gpus={},
    )


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except FileNotFoundError:
        raise FormatError(path, None, "no such file") from None
    except OSError as exc:
        raise FormatError(path, None, f"cannot read: {exc.strerror or exc}") from None
