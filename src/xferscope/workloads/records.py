"""What the workloads' records share: a finite number or None, JSON written with indentation, and a file read
back as a given record type (a damaged or foreign one is one line naming the field)."""

from __future__ import annotations

import math
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
