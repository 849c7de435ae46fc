"""Line charts in braille characters (2x4 dots a cell), without any Textual: pure functions.

Each series is resampled to one value per dot column (the mean of the points
that fall in it) and drawn as a line joining successive columns. Several
series share one scale; where they cross, the cell takes the colour of the
series drawn last.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

_BASE = 0x2800
# dot bit for (row 0..3, column 0..1) inside a cell
_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))


@dataclass(frozen=True)
class Curve:
    name: str
    points: Sequence[tuple[float, float]]  # (x, y), x ascending
    color: str


def nice_ceiling(value: float) -> float:
    """The next 1, 2, 2.5, 5 x 10^k at or above ``value`` (for a y axis that reads well)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    exp = math.floor(math.log10(value))
    base = 10.0**exp
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if value <= step * base * (1 + 1e-9):
            return step * base
    return 10.0 * base


def columns(points: Sequence[tuple[float, float]], x0: float, x1: float, ncols: int) -> list[float | None]:
    """One value per dot column over [x0, x1]: the mean of the points in it, interpolated between
    columns that have points, None before the first and after the last."""
    sums = [0.0] * ncols
    counts = [0] * ncols
    span = x1 - x0
    if span <= 0 or ncols <= 0:
        return [None] * ncols
    for x, y in points:
        if y is None or not math.isfinite(y) or x < x0 or x > x1:
            continue
        c = min(ncols - 1, int((x - x0) / span * ncols))
        sums[c] += y
        counts[c] += 1
    out: list[float | None] = [sums[i] / counts[i] if counts[i] else None for i in range(ncols)]
    known = [i for i, v in enumerate(out) if v is not None]
    for a, b in itertools.pairwise(known):  # join sparse points: interpolate the columns between them
        for i in range(a + 1, b):
            out[i] = out[a] + (out[b] - out[a]) * (i - a) / (b - a)
    return out


def plot(
    series: Sequence[Curve], width: int, height: int, x_range: tuple[float, float], y_max: float
) -> list[list[tuple[str, str | None]]]:
    """A ``height`` x ``width`` grid of (character, colour) cells; y runs from 0 (bottom) to ``y_max``."""
    dots_x, dots_y = width * 2, height * 4
    bits = [[0] * width for _ in range(height)]
    color: list[list[str | None]] = [[None] * width for _ in range(height)]
    if width <= 0 or height <= 0 or y_max <= 0:
        return [[(" ", None)] * max(width, 0) for _ in range(max(height, 0))]
    for s in series:
        prev = None
        for cx, value in enumerate(columns(s.points, x_range[0], x_range[1], dots_x)):
            if value is None:
                prev = None
                continue
            dy = dots_y - 1 - min(dots_y - 1, max(0, round(value / y_max * (dots_y - 1))))
            lo, hi = (dy, dy) if prev is None else (min(prev, dy), max(prev, dy))
            _dots(bits, color, cx, lo, hi, s.color)
            prev = dy
    return [
        [(chr(_BASE + bits[r][c]) if bits[r][c] else " ", color[r][c]) for c in range(width)] for r in range(height)
    ]


def _dots(bits, color, cx: int, y0: int, y1: int, col: str) -> None:
    cell_x, sub_x = divmod(cx, 2)
    for dy in range(y0, y1 + 1):
        cell_y, sub_y = divmod(dy, 4)
        bits[cell_y][cell_x] |= _BITS[sub_y][sub_x]
        color[cell_y][cell_x] = col


BLOCKS = " ▁▂▃▄▅▆▇█"


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of ``width`` cells filled to ``fraction`` (0..1) with eighth-blocks."""
    fraction = 0.0 if not math.isfinite(fraction) else max(0.0, min(1.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part and full < width else ""
    return ("█" * full + partial).ljust(width)


def level(fraction: float) -> str:
    """One cell whose height shows ``fraction`` (0..1): for many cores in little space."""
    fraction = 0.0 if not math.isfinite(fraction) else max(0.0, min(1.0, fraction))
    return BLOCKS[round(fraction * 8)]
