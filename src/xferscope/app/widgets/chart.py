"""A braille line chart with a y axis in explicit units; several series share one scale.

Drawn line by line as strips of segments (one per run of equal colour), cached
until the data or the size changes: the cheapest way Textual offers to paint a
picture that changes several times a second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from xferscope.app import figures
from xferscope.app.braille import Curve, nice_ceiling, plot

GUTTER = 8
UnitPicker = Callable[[float], tuple[str, float]]

#: series colours that read on dark and light themes (and map well to 256 colours)
PALETTE = ("#5fd7ff", "#ff87d7", "#ffd75f", "#87d787", "#ff5f5f", "#87afff", "#d7af87", "#afafaf")


@lru_cache(maxsize=64)
def _style(spec: str | None) -> Style:
    return Style.parse(spec) if spec else Style()


def time_axis_end(record) -> float | None:
    """Where a run's time axis ends: its planned duration while it runs, its length once it has ended."""
    return record.result.seconds if record.result is not None else record.spec.duration


class LineChart(Widget):
    """Values over x (time by default). ``unit_for(max_value)`` gives the y unit and divisor (GiB/s, 2**30).
    ``y_log``: a logarithmic y axis (for values spanning decades, like cache and memory latency); ``marks``
    given to ``set_data`` are drawn as dotted vertical lines with their labels at the top."""

    DEFAULT_CSS = """
    LineChart { height: 1fr; min-height: 3; }
    """

    def __init__(
        self,
        unit_for: UnitPicker,
        *,
        empty: str = "waiting for samples",
        x_format: Callable[[float], str] = figures.seconds,
        y_log: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.unit_for = unit_for
        self.empty = empty
        self.x_format = x_format
        self.y_log = y_log
        self._marks: Sequence[tuple[float, str]] = ()
        self._series: Sequence[Curve] = ()
        self._x_range = (0.0, 1.0)
        self._strips: list[Strip] | None = None
        self._strips_size = (0, 0)

    def set_data(
        self,
        series: Sequence[Curve],
        x_end: float | None = None,
        x_start: float | None = None,
        marks: Sequence[tuple[float, str]] = (),
    ) -> None:
        """Draw ``series`` (points in ascending x); x runs from ``x_start`` (default: the first point,
        or 0 when that is under 1) to ``x_end`` or the last point, whichever is further."""
        self._marks = tuple(marks)
        xs = [x for s in series if s.points for x in (s.points[0][0], s.points[-1][0])]
        if x_start is None:
            x0 = min(xs) if xs else 0.0
            x0 = 0.0 if x0 < 1.0 else x0  # a run's chart starts at 0 s until the window slides
        else:
            x0 = x_start
        x1 = max(xs + [x_end or 0.0]) if xs or x_end else 1.0
        self._series = series
        self._x_range = (x0, max(x1, x0 + 1e-3))
        self._strips = None
        self.refresh()

    def render_line(self, y: int) -> Strip:
        size = (self.size.width, self.size.height)
        if self._strips is None or self._strips_size != size:
            self._strips, self._strips_size = self._draw(*size), size
        return self._strips[y] if y < len(self._strips) else Strip.blank(size[0])

    def _draw(self, width: int, height: int) -> list[Strip]:
        values = [y for s in self._series for _, y in s.points if not figures.missing(y)]
        dim = _style("dim")
        if not values or width <= GUTTER + 2 or height < 2:
            text = self.empty[:width] if width > len(self.empty) else ""
            return [Strip([Segment(text, dim)]).adjust_cell_length(width)] if height else []
        unit, div = self.unit_for(max(values))
        rows = height - 1
        if self.y_log:
            positive = [v / div for v in values if v > 0] or [1.0]
            bottom = math.floor(math.log10(min(positive)))
            top = max(math.ceil(math.log10(max(positive))), bottom + 1)
            scaled = [
                Curve(
                    s.name,
                    [(x, math.log10(y / div) - bottom) for x, y in s.points if not figures.missing(y) and y > 0],
                    s.color,
                )
                for s in self._series
            ]
            grid = plot(scaled, width - GUTTER, rows, self._x_range, float(top - bottom))
            labels = {0: figures.scaled(10.0**top), rows - 1: figures.scaled(10.0**bottom)}
            if rows > 2:
                labels[rows // 2] = figures.scaled(10.0 ** ((top + bottom) / 2))
        else:
            top = nice_ceiling(max(values) / div)
            grid = plot(
                [Curve(s.name, [(x, y / div) for x, y in s.points], s.color) for s in self._series],
                width - GUTTER,
                rows,
                self._x_range,
                top,
            )
            labels = {0: figures.scaled(top), rows // 2: figures.scaled(top / 2) if rows > 2 else "", rows - 1: "0"}
        self._draw_marks(grid, width - GUTTER)
        strips = []
        for r, row in enumerate(grid):
            segments = [Segment(labels.get(r, "").rjust(GUTTER - 2) + " ┤", dim)]
            run, color = [], None
            for ch, col in row:
                if col != color and run:
                    segments.append(Segment("".join(run), _style(color)))
                    run = []
                run.append(ch)
                color = col
            if run:
                segments.append(Segment("".join(run), _style(color)))
            strips.append(Strip(segments).adjust_cell_length(width))
        x0, x1 = self._x_range
        left, right = self.x_format(x0), self.x_format(x1)
        axis_w = width - GUTTER
        strips.append(
            Strip(
                [
                    Segment(unit.rjust(GUTTER - 1)[: GUTTER - 1] + " ", _style("bold")),
                    Segment((left + right.rjust(max(axis_w - len(left), 0)))[:axis_w], dim),
                ]
            ).adjust_cell_length(width)
        )
        return strips

    def _draw_marks(self, grid: list[list[tuple[str, str | None]]], width: int) -> None:
        """Dotted vertical lines where the grid is blank, each labelled in the top row."""
        x0, x1 = self._x_range
        for x, label in self._marks:
            if not x0 <= x <= x1 or not grid:
                continue
            col = min(width - 1, int((x - x0) / (x1 - x0) * width))
            for row in grid:
                if row[col][0] == " ":
                    row[col] = ("┊", "dim")
            top, text = grid[0], label[: max(0, width - col - 1)]
            if all(top[col + 1 + i][0] == " " for i in range(len(text))):
                for i, ch in enumerate(text):
                    top[col + 1 + i] = (ch, "dim")
