"""A chart as data: panels of series of points, with their axes, ticks and marks; how it is drawn is the
renderers' business (``svg_chart``, ``png_chart``), what it shows is ``plot``'s."""

from __future__ import annotations

from dataclasses import dataclass, field

from xferscope.units import format_size


@dataclass
class PlotLine:
    name: str
    points: list[tuple[float, float, float]] = field(default_factory=list)  # (x, y, error)


@dataclass
class Panel:
    title: str
    x_label: str
    y_label: str
    series: list[PlotLine] = field(default_factory=list)
    categories: list[str] | None = None  # categorical x: x values are indices into this list
    x_log: bool = False
    x_is_size: bool = False
    y_log: bool = False
    x_ticks: list[float] | None = None  # where to put x ticks (default: every x of a log axis)
    marks: list[tuple[float, str]] = field(default_factory=list)  # vertical lines at x, labelled


@dataclass
class Chart:
    title: str
    panels: list[Panel]


def tick_text(panel: Panel, value: float) -> str:
    if panel.x_is_size:
        return format_size(value)
    return f"{value:g}"
