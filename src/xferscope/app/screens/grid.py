"""A profile's grid as its points finish: median throughput over repetitions with the spread, as lines
(against block size, one line per the other varying fields) or as a heatmap, beside a table of statistics."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Static

from xferscope.app import figures
from xferscope.app.braille import Curve
from xferscope.app.grid_model import MIB, GridRun, PointStats, spread_text, verdict_text
from xferscope.app.screens.view import ViewScreen
from xferscope.app.widgets.chart import PALETTE, LineChart
from xferscope.app.widgets.title import title_text
from xferscope.compare.verdict import RULE_REPEATED
from xferscope.units import figure_text

#: heatmap shades, low to high (256-colour friendly), and the text colour that reads on each
SHADES = ("#1c1c5f", "#005f87", "#00875f", "#5f8700", "#878700", "#af8700", "#d7af00", "#ffd700")
#: the verdict against the baseline next to the median it rests on, so that a narrow terminal cuts the spread columns
#: rather than the answer
TABLE_HEADERS = ("#", "point", "reps", "MiB/s", "vs #{baseline}", "±sd", "min–max", "p99 µs")


def line_series(grid: GridRun, points: list[PointStats]) -> list[Curve]:
    """Per line: min and max over repetitions (dim, the spread), then the median on top; in bytes/s."""
    spreads, medians = [], []
    for i, (name, line) in enumerate(grid.lines(points)):
        color = PALETTE[i % len(PALETTE)]
        if not line:
            continue
        for stat in ("min", "max"):
            spreads.append(Curve(f"{name} {stat}", [(x, st[stat] * MIB) for x, st in line], f"dim {color}"))
        medians.append(Curve(name, [(x, st["median"] * MIB) for x, st in line], f"bold {color}"))
    return spreads + medians


def heatmap_text(grid: GridRun, points: list[PointStats], width: int) -> Text:
    """Rows: the lines' labels; columns: the x values; cells: median MiB/s over repetitions, shaded."""
    rows = grid.cells(points)
    medians = [p.throughput["median"] for _, row in rows for p in row if p is not None and p.done]
    top = max(medians, default=0.0)
    label_w = min(max([len(name) for name, _ in rows] + [len(grid.x_axis or "")]), max(width // 3, 8))
    cell_w = max(max((len(grid.x_text(x)) for x in grid.x_values), default=4), 8) + 1
    out = Text(no_wrap=True, overflow="crop")
    out.append((grid.x_axis or "")[:label_w].ljust(label_w), style="dim")
    for x in grid.x_values:
        out.append(grid.x_text(x).rjust(cell_w), style="bold")
    out.append("\n")
    for name, row in rows:
        out.append(name[:label_w].ljust(label_w), style="bold")
        for p in row:
            if p is None:
                out.append("".rjust(cell_w))
            elif not p.done:
                out.append({"running": "…", "waiting": "·"}.get(p.state, p.state).rjust(cell_w), style="dim")
            else:
                v = p.throughput["median"]
                shade = min(int(v / top * len(SHADES)), len(SHADES) - 1) if top > 0 else 0
                out.append(" ")
                out.append(
                    figure_text(v, "{:,.0f}").rjust(cell_w - 1),
                    style=Style(bgcolor=SHADES[shade], color="black" if shade >= 4 else "white"),
                )
        out.append("\n")
    out.append("\ncells: median MiB/s over repetitions", style="dim")
    if top > 0:
        out.append(" · shade ", style="dim")
        for shade in SHADES:
            out.append(" ", style=Style(bgcolor=shade))
        out.append(f" 0 to {figure_text(top, '{:,.0f}')}", style="dim")
    return out


class GridScreen(ViewScreen):
    BINDINGS = [
        Binding("v", "toggle_view", "Lines/heatmap", id="grid-view"),
        Binding("b", "baseline", "Baseline", id="grid-baseline"),
    ]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.heatmap: bool | None = None  # None: what suits the grid
        self._table_key: tuple | None = None
        self._grid: GridRun | None = None
        self.baseline = 0  # row of the point the others are set against

    def compose(self) -> ComposeResult:
        yield Static("", id="grid-title", classes="screen-title")
        with Vertical(classes="panel", id="grid-chart") as v:
            v.border_title = "Throughput"
            yield LineChart(figures.rate_unit, empty="no point measured yet", x_format=self._x_label, id="grid-lines")
            yield Static("", id="grid-heatmap")
        yield DataTable(cursor_type="row", zebra_stripes=True, id="grid-table")
        yield Static(RULE_REPEATED, id="grid-rule")
        yield Footer()

    def _x_label(self, x: float) -> str:
        grid = self._grid
        if grid is None or not grid.x_values:
            return ""
        i = round(x)
        return grid.x_text(grid.x_values[i]) if 0 <= i < len(grid.x_values) else ""

    def action_baseline(self) -> None:
        table = self.query_one("#grid-table", DataTable)
        if table.row_count:
            self.baseline = table.cursor_row
            self._table_key = None
            self.refresh_view()

    def action_toggle_view(self) -> None:
        grid = self.app.grid
        current = self.heatmap if self.heatmap is not None else (grid.heatmap_default if grid else False)
        self.heatmap = not current
        self.refresh_view()

    def refresh_view(self) -> None:
        grid: GridRun | None = self.app.grid
        if grid is not self._grid:
            self._grid, self.heatmap, self._table_key, self.baseline = grid, None, None, 0
        title = title_text()
        chart = self.query_one(LineChart)
        heat = self.query_one("#grid-heatmap", Static)
        panel = self.query_one("#grid-chart")
        if grid is None:
            title.append(
                " · grid · nothing yet: open a profile with several points or repetitions (s, then o) and start it (r)",
                style="dim",
            )
            self.query_one("#grid-title", Static).update(title)
            chart.set_data([])
            heat.display = False
            return
        points = grid.points()
        done = sum(1 for p in points if p.state == "done")
        heatmap = self.heatmap if self.heatmap is not None else grid.heatmap_default
        title.append(
            f" · grid · {done}/{len(points)} points · {grid.repetitions} "
            f"rep{'s' if grid.repetitions != 1 else ''} each · {grid.describe(heatmap)}"
        )
        self.query_one("#grid-title", Static).update(title)
        chart.display, heat.display = not heatmap, heatmap
        if heatmap:
            panel.border_title = "Throughput heatmap (v: lines)"
            panel.border_subtitle = ""
            heat.update(heatmap_text(grid, points, self.size.width - 4))
        else:
            panel.border_title = "Throughput: median over repetitions, dim: min and max (v: heatmap)"
            names = [name for name, _ in grid.lines(points)]
            panel.border_subtitle = (
                "  ".join(f"[{PALETTE[i % len(PALETTE)]}]■[/] {name}" for i, name in enumerate(names))
                if len(names) > 1
                else ""
            )
            chart.set_data(line_series(grid, points), x_end=max(len(grid.x_values) - 1, 0), x_start=0.0)
        self._show_table(points)

    def _show_table(self, points: list[PointStats]) -> None:
        key = tuple((p.done, p.state) for p in points)
        if key == self._table_key:
            return
        self._table_key = key
        table = self.query_one("#grid-table", DataTable)
        row = table.cursor_row
        table.clear(columns=True)
        base = points[min(self.baseline, len(points) - 1)] if points else None
        table.add_columns(*(h.format(baseline=base.index if base else 1) for h in TABLE_HEADERS))
        for p in points:
            st = p.throughput
            reps = f"{p.done}/{p.planned}" + ("" if p.state in ("done", "waiting") else f" {p.state}")
            spread = f"{figure_text(st['min'], '{:,.1f}')}–{figure_text(st['max'], '{:,.1f}')}" if p.done else "-"
            cells = (
                str(p.index),
                p.label,
                reps,
                figure_text(st["median"], "{:,.1f}"),
                verdict_text(p, base),
                spread_text(st) or "-",
                spread,
                figure_text(p.p99_us["median"], "{:,.1f}"),
            )
            table.add_row(*(Text(c, style="dim" if not p.done else "") for c in cells), key=str(p.index))
        if points:
            table.move_cursor(row=min(row, len(points) - 1))
