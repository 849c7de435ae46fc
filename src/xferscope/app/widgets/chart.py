"""A braille line chart with a y axis in explicit units; several series share one scale."""
from __future__ import annotations

from typing import Callable, Sequence

from rich.text import Text
from textual.widget import Widget

from xferscope.app import figures
from xferscope.app.braille import Series, nice_ceiling, plot

GUTTER = 8
UnitPicker = Callable[[float], tuple[str, float]]

#: series colours that read on dark and light themes and in 256 colours
PALETTE = ("bright_cyan", "bright_magenta", "bright_yellow", "bright_green", "bright_red", "bright_blue",
           "cyan", "magenta")


def time_axis_end(record) -> float | None:
    """Where a run's time axis ends: its planned duration while it runs, its length once it has ended."""
    return record.result.seconds if record.result is not None else record.spec.duration


class LineChart(Widget):
    """Values over time. ``unit_for(max_value)`` gives the axis unit and divisor (e.g. GiB/s, 2**30)."""

    DEFAULT_CSS = """
    LineChart { height: 1fr; min-height: 3; }
    """

    def __init__(self, unit_for: UnitPicker, *, empty: str = "waiting for samples",
                 x_format: Callable[[float], str] = figures.seconds, **kwargs):
        super().__init__(**kwargs)
        self.unit_for = unit_for
        self.empty = empty
        self.x_format = x_format
        self._series: Sequence[Series] = ()
        self._x_range = (0.0, 1.0)

    def set_data(self, series: Sequence[Series], x_end: float | None = None, x_start: float | None = None) -> None:
        """Draw ``series`` (points in ascending x); x runs from ``x_start`` (default: the first point,
        or 0 when that is under 1) to ``x_end`` or the last point, whichever is further."""
        xs = [p[0] for s in series for p in (s.points[0], s.points[-1]) if s.points] if series else []
        if x_start is None:
            x0 = min(xs) if xs else 0.0
            x0 = 0.0 if x0 < 1.0 else x0  # a run's chart starts at 0 s until the window slides
        else:
            x0 = x_start
        x1 = max(xs + [x_end or 0.0]) if xs or x_end else 1.0
        self._series = series
        self._x_range = (x0, max(x1, x0 + 1e-3))
        self.refresh()

    def render(self) -> Text:
        width, height = self.size.width, self.size.height
        values = [y for s in self._series for _, y in s.points if not figures.missing(y)]
        if not values or width <= GUTTER + 2 or height < 2:
            return Text(self.empty if width > len(self.empty) else "", style="dim")
        unit, div = self.unit_for(max(values))
        top = nice_ceiling(max(values) / div)
        rows = height - 1
        grid = plot([Series(s.name, [(x, y / div) for x, y in s.points], s.color) for s in self._series],
                    width - GUTTER, rows, self._x_range, top)
        out = Text(no_wrap=True, overflow="crop")
        labels = {0: figures.scaled(top), rows // 2: figures.scaled(top / 2) if rows > 2 else "",
                  rows - 1: "0"}
        for r, row in enumerate(grid):
            out.append(labels.get(r, "").rjust(GUTTER - 2) + " ┤", style="dim")
            for ch, color in row:
                out.append(ch, style=color)
            out.append("\n")
        x0, x1 = self._x_range
        left, right = self.x_format(x0), self.x_format(x1)
        axis_w = width - GUTTER
        out.append(unit.rjust(GUTTER - 1)[: GUTTER - 1] + " ", style="bold")
        out.append((left + right.rjust(max(axis_w - len(left), 0)))[:axis_w], style="dim")
        return out
