"""What the workloads' records share: a finite number or None, JSON written with indentation, and a file read
back as a given record type (a damaged or foreign one is one line naming the field)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypedDict, TypeVar

import msgspec

from xferscope.errors import FormatError
from xferscope.records import WorkloadEnvironment

T = TypeVar("T")


def num(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) or math.isinf(x) else float(x)


def encode(result: Any) -> bytes:
    """A workload's record as its file holds it (``records.json_text``)."""
    from xferscope.records import json_text

    return json_text(result).encode()


def decode_as(kind: type[T], text: bytes | str, path: str, what: str) -> T:
    try:
        return msgspec.json.decode(text, type=kind)
    except msgspec.ValidationError as exc:
        raise FormatError(path, None, f"not {what} xferscope can read: {exc}") from None
    except msgspec.DecodeError as exc:
        raise FormatError(path, None, f"not JSON: {exc}") from None


class WorkloadResult(msgspec.Struct, kw_only=True):
    """What every workload record carries: its version, kind, how it ended and its spec (each kind's own), then
    what it read, its process's CPU (per GiB too) and peak memory, its labels, environment and error."""

    schema_version: int = 1
    kind: str = ""
    status: str  # ok, interrupted, failed
    spec: Any
    bytes_read: int
    cpu_seconds: float | None
    cpu_s_per_gib: float | None
    peak_rss_bytes: int | None
    labels: list[str] = []
    environment: WorkloadEnvironment = {}
    error: str | None = None

    @property
    def incomplete(self) -> bool:
        return self.status != "ok"

    @property
    def path(self) -> str:
        return self.spec.path


class LibraryFacts(msgspec.Struct, kw_only=True):
    """A library path's own facts (``libraries``): its package and version, torch's, what it called, the settings it
    ran with, the I/O it actually did (as it ran, fallbacks included) and its set-up's seconds, kept out of the
    timer (import, CUDA context, cuFile's driver, its loader)."""

    path: str
    package: str
    version: str
    torch: str
    call: str
    settings: dict[str, str] = {}
    io_mode: str = ""
    setup_s: dict[str, float] = {}


class RunEnd(TypedDict, total=False):
    """How a workload run ended, as its engine process reported it (the keywords of the records' constructors)."""

    status: str
    seconds: float
    cpu_seconds: float | None
    peak_rss_bytes: int | None
    labels: Sequence[str]
    environment: WorkloadEnvironment | None
    error: str | None


class ProcessFields(TypedDict):
    """What a workload record says of its engine processes: CPU seconds, per GiB, the peak RSS and the labels."""

    cpu_seconds: float | None
    cpu_s_per_gib: float | None
    peak_rss_bytes: int | None
    labels: list[str]


class EndFields(ProcessFields):
    """The ``WorkloadResult`` fields of how a run ended."""

    status: str
    bytes_read: int
    environment: WorkloadEnvironment
    error: str | None


def run_end(bytes_read: int, end: RunEnd) -> EndFields:
    """The ``WorkloadResult`` fields of a run that read ``bytes_read`` and ended as ``end`` says."""
    cpu_seconds = end.get("cpu_seconds")
    gib = bytes_read / (1 << 30)
    return {
        "status": end["status"],
        "bytes_read": bytes_read,
        "cpu_seconds": cpu_seconds,
        "cpu_s_per_gib": cpu_seconds / gib if cpu_seconds is not None and gib > 0 else None,
        "peak_rss_bytes": end.get("peak_rss_bytes"),
        "labels": list(end.get("labels") or ()),
        "environment": (end.get("environment") or WorkloadEnvironment()).copy(),
        "error": end.get("error"),
    }
