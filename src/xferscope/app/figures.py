"""How the console writes numbers: explicit units, and a dash where nothing was measured."""

from __future__ import annotations

import math

from xferscope.units import GIB, MIB

DASH = "-"


def missing(v: float | None) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def rate_unit(max_bytes_per_s: float) -> tuple[str, float]:
    """GiB/s from 1 GiB/s up, MiB/s below: (unit, divisor)."""
    return ("GiB/s", GIB) if max_bytes_per_s >= GIB else ("MiB/s", MIB)


def rate(bytes_per_s: float | None) -> str:
    if missing(bytes_per_s):
        return DASH
    unit, div = rate_unit(bytes_per_s)
    return f"{bytes_per_s / div:.2f} {unit}" if unit == "GiB/s" else f"{bytes_per_s / div:.1f} {unit}"


def latency_unit(max_us: float) -> tuple[str, float]:
    """µs below 1 ms, ms from there: (unit, divisor from µs)."""
    return ("ms", 1e3) if max_us >= 1e3 else ("µs", 1.0)


def latency(us: float | None) -> str:
    """'37.5 µs', '954 µs', '1.65 ms', '20.6 ms'."""
    if missing(us):
        return DASH
    unit, div = latency_unit(us)
    value = us / div
    if unit == "ms":
        return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"
    return f"{value:.1f} µs" if value < 100 else f"{value:.0f} µs"


def count(v: float | None) -> str:
    return DASH if missing(v) else f"{v:,.0f}"


def pct(v: float | None) -> str:
    return DASH if missing(v) else f"{v:.1f}%"


def seconds(t: float | None) -> str:
    """'0s', '9.8s', '2m05s', '1h02m'."""
    if missing(t):
        return DASH
    if t == 0:
        return "0s"
    if t < 60:
        return f"{t:.1f}s" if t < 10 else f"{t:.0f}s"
    m, s = divmod(int(t), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def scaled(value: float, unit: str = "") -> str:
    """An axis label: three significant figures at most."""
    if value >= 100 or value == 0:
        text = f"{value:.0f}"
    elif value >= 10:
        text = f"{value:.1f}".rstrip("0").rstrip(".")
    else:
        text = f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{text} {unit}".rstrip()


def size(n: float) -> str:
    """Bytes in binary units with three significant figures: '487 MiB', '1.17 GiB', '12.0 KiB'."""
    for unit, mult in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= mult:
            v = n / mult
            return f"{v:.2f} {unit}" if v < 10 else f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{int(n)} B"
