"""What the workloads' records share: a finite number or None, JSON written with indentation, and a file read
back as a given record type (a damaged or foreign one is one line naming the field)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec

from xferscope.errors import FormatError

T = TypeVar("T")


def num(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) or math.isinf(x) else float(x)


def encode(result: Any) -> bytes:
    return msgspec.json.format(msgspec.json.encode(result), indent=2)


def decode_as(kind: type[T], text: bytes | str, path: str, what: str) -> T:
    try:
        return msgspec.json.decode(text, type=kind)
    except msgspec.ValidationError as exc:
        raise FormatError(path, None, f"not {what} xferscope can read: {exc}") from None
    except msgspec.DecodeError as exc:
        raise FormatError(path, None, f"not JSON: {exc}") from None


def run_end(
    bytes_read: int,
    cpu_seconds: float | None,
    peak_rss_bytes: int | None,
    labels: Sequence[str],
    environment: dict[str, Any] | None,
    error: str | None,
) -> dict[str, Any]:
    """The fields every workload record ends with: what it read, its process's CPU (per GiB too) and peak memory,
    its labels, environment and error."""
    gib = bytes_read / (1 << 30)
    return {
        "bytes_read": bytes_read,
        "cpu_seconds": cpu_seconds,
        "cpu_s_per_gib": cpu_seconds / gib if cpu_seconds is not None and gib > 0 else None,
        "peak_rss_bytes": peak_rss_bytes,
        "labels": list(labels),
        "environment": dict(environment or {}),
        "error": error,
    }
