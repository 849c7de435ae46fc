"""Sizes and durations as people type them (64K, 1M, 1G, 512, 10s) and as tools print them."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)?\s*$", re.IGNORECASE)
_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}

GIB = float(1 << 30)
MIB = float(1 << 20)


def parse_size(text: str | int) -> int:
    """Parse a byte size. Suffixes are binary as in gdsio and fio: 4K = 4096, 1M = 1048576.

    Raises ValueError with a readable message.
    """
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size must not be negative: {text}")
        return text
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"not a size: {text!r} (use a number with an optional K, M, G or T suffix, e.g. 64K)")
    number, unit, _ = match.groups()
    value = Fraction(number) * _MULT[unit.lower()]  # exact, however many digits
    if value.denominator != 1:
        raise ValueError(f"not a whole number of bytes: {text!r}")
    return int(value)


def figure_text(value: float | None, fmt: str = "{:.1f}", missing: str = "-") -> str:
    """A figure as a table cell: ``fmt`` of it, or ``missing`` where there is none (None, NaN or infinite)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return fmt.format(value)


def format_size(n: float) -> str:
    """Short binary size: 4096 -> '4K', 1048576 -> '1M', 1536 -> '1536'."""
    n = int(n)
    for suffix, mult in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def format_bytes(n: float) -> str:
    """Human size with binary units: '1.50 GiB'."""
    for suffix, mult in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= mult:
            return f"{n / mult:.2f} {suffix}"
    return f"{int(n)} B"


def format_rate(bytes_per_s: float) -> str:
    """Throughput with explicit binary units: GiB/s when at least 1 GiB/s, else MiB/s."""
    if bytes_per_s >= GIB:
        return f"{bytes_per_s / GIB:.2f} GiB/s"
    return f"{bytes_per_s / MIB:.1f} MiB/s"


def parse_duration(text: str | float | int) -> float:
    """Seconds from '10', '10s', '500ms', '2m'."""
    if isinstance(text, (int, float)):
        return float(text)
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", str(text))
    if not match:
        raise ValueError(f"not a duration: {text!r} (seconds, or with ms/s/m/h, e.g. 10s)")
    value, unit = float(match.group(1)), match.group(2) or "s"
    seconds = value * {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]
    if not math.isfinite(seconds):
        raise ValueError(f"not a duration: {text!r} is beyond any clock")
    return seconds
