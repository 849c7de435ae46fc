"""Memory sweeps drawn point by point beside their table: latency against bandwidth with MLC's loaded-latency
rows, the cache-level curve (latency against working set, cache sizes marked), the NUMA matrix, the max-bandwidth
table; and every result of the session or opened from a file (a built-in run, an mlc run, an imported mlc
output) side by side (``v``)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, Label, Select, Static

from xferscope.app.braille import Curve, nice_ceiling
from xferscope.app.mem_model import (
    MEM_FIELD_CONTROL,
    TABLE_HEADERS,
    MemFormValues,
    build_mem_spec,
    curve_rows,
    idle_note,
    matrix_rows,
    mlc_row,
    peak_rows,
    series_key,
)
from xferscope.app.messages import MemPointMeasured, MemSweepFailed, MemSweepFinished
from xferscope.app.screens.view import ConsoleScreen
from xferscope.app.widgets.chart import PALETTE, LineChart
from xferscope.app.widgets.title import title_text
from xferscope.errors import XferscopeError
from xferscope.memory.sweep import CURVE, IDLE
from xferscope.safe_write import write_output

#: (control id, label, width, placeholder) of the typed fields
FIELDS = (
    ("mem-traffic", "Traffic", 8, "default"),
    ("mem-stride", "Stride", 8, "64,256"),
    ("mem-seconds", "Point s", 6, "0.5"),
    ("mem-pages", "Pages", 4, "thp"),
    ("mem-delays", "Delays", 22, "MLC's 19 delays"),
    ("mem-threads", "Threads", 6, "all"),
    ("mem-buffer", "Buffer", 6, "auto"),
    ("mem-locality", "Locality", 8, "default"),
)
FIRST_ROW = 4  # fields on the first form row, after the mode
VALUE_OF = {
    "mem-traffic": "traffic",
    "mem-stride": "stride",
    "mem-seconds": "seconds",
    "mem-delays": "delays",
    "mem-threads": "threads",
    "mem-buffer": "buffer",
    "mem-locality": "locality",
    "mem-pages": "pages",
}
MODES = ("loaded", "idle", "peak", "curve", "matrix")
#: the table panel's width for what it shows (the chart takes the rest)
TABLE_WIDTH = {"loaded": 52, "peak": 40, "curve": 36, "matrix": 40, "side": "2fr"}
#: the engine's last words shown under a failed sweep: their heading, then the fault handler's first line and
#: the innermost frames (``isolation.fault_summary``), or the start of its stderr's tail
FAILURE_LINES = 5


def _fill(table: DataTable, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """The table's columns, each as wide as its widest cell, then its rows. The widths are set here: left to the
    table, they are measured after it is first drawn, and a heading drawn before could stay out of line with its
    column, or a column at its heading's width (the max-bandwidth labels, cut to "ALL Rea" under load)."""

    def width(cell: Any) -> int:
        return cell.cell_len if isinstance(cell, Text) else cell_len(str(cell))

    for i, h in enumerate(headers):
        table.add_column(h, width=max([cell_len(h), *(width(r[i]) for r in rows if i < len(r))]))
    for row in rows:
        table.add_row(*row)


def _size_of_log2(x: float) -> str:
    from xferscope.units import format_size

    return format_size(round(2**x / 1024) * 1024) if x >= 10 else format_size(round(2**x))


def _ns(max_ns: float) -> tuple[str, float]:
    return "ns", 1.0


def _mb_s(v: float) -> str:
    return f"{v / 1000:.0f}k" if v >= 10_000 else f"{v:.0f}"


class MemoryScreen(ConsoleScreen):
    BINDINGS = [
        Binding("r", "start", "Start sweep", id="start-sweep"),
        Binding("x", "stop", "Stop", id="stop-sweep"),
        Binding("v", "toggle_side_by_side", "Side by side", id="mem-side-by-side"),
        Binding("o", "open_results", "Open results", id="mem-open-results"),
        Binding("escape", "leave_field", "Leave field", show=False, id="leave-mem-field"),
    ]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.values = MemFormValues()
        self.queue: list = []  # MemSpecs still to run (a profile's points)
        self.points: list = []  # MemPoints measured, in order
        self.results: list = []  # MemResults of finished sweeps, then those opened from files
        self.state = "idle"
        self.side_by_side = False  # the table shows every result side by side instead of this sweep's points
        self._sweep = None
        self._environment: dict = {}  # what the running (or last) sweep's engine said about the machine
        self._series_seen: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="mem-title", classes="screen-title")
        with Horizontal(classes="mem-form"):
            yield Label("Mode", classes="mem-label")
            yield Select(
                [(m, m) for m in MODES], value=self.values.mode, allow_blank=False, compact=True, id="mem-mode"
            )
            for cid, label, width, hint in FIELDS[:FIRST_ROW]:
                yield Label(label, classes="mem-label")
                yield Input(
                    getattr(self.values, VALUE_OF[cid]), placeholder=hint, compact=True, id=cid, classes=f"w{width}"
                )
        with Horizontal(classes="mem-form"):
            for cid, label, width, hint in FIELDS[FIRST_ROW:]:
                yield Label(label, classes="mem-label")
                yield Input(
                    getattr(self.values, VALUE_OF[cid]), placeholder=hint, compact=True, id=cid, classes=f"w{width}"
                )
        yield Static("", id="mem-error", classes="form-error")
        with Horizontal(id="mem-body"):
            with Vertical(classes="panel", id="mem-curve") as v:
                v.border_title = "Latency ns vs bandwidth MB/s"
                yield LineChart(
                    _ns, empty="press r to sweep: points appear as they are measured", x_format=_mb_s, id="mem-chart"
                )
                yield Static("", id="mem-legend")
            with Vertical(classes="panel", id="mem-table-panel") as v:
                v.border_title = "Loaded latency"
                yield DataTable(cursor_type="none", zebra_stripes=True, id="mem-table")
        yield Static("", id="mem-notes")
        yield Footer()

    def on_mount(self) -> None:
        self._fill_table()
        self._title()

    # ----------------------------------------------------------------- form
    def form_values(self) -> MemFormValues:
        values = {VALUE_OF[cid]: self.query_one(f"#{cid}", Input).value for cid, *_ in FIELDS}
        return MemFormValues(mode=str(self.query_one("#mem-mode", Select).value), **values)

    def load(self, specs: list) -> None:
        """Show a memory profile's first point in the form; start runs all of them."""
        self.values = MemFormValues.from_spec(specs[0])
        with self.prevent(Input.Changed, Select.Changed):
            self.query_one("#mem-mode", Select).value = self.values.mode
            for cid, *_ in FIELDS:
                self.query_one(f"#{cid}", Input).value = getattr(self.values, VALUE_OF[cid])
        self.queue = list(specs)
        self.query_one("#mem-notes", Static).update(
            Text(f"profile: {len(specs)} sweeps run one after another (editing the form replaces them)")
        )

    @on(Input.Changed)
    @on(Select.Changed)
    def _edited(self) -> None:
        self.queue = []
        self._spec_or_explain()

    def _spec_or_explain(self):
        return self.built_or_explained(
            lambda: build_mem_spec(self.form_values()), "mem-error", MEM_FIELD_CONTROL, fallback="mem-mode"
        )

    def action_leave_field(self) -> None:
        self.set_focus(None)

    # ---------------------------------------------------------------- sweep
    @on(Input.Submitted)
    def action_start(self) -> None:
        if self.state == "running":
            self.notify("a sweep is running: stop it (x) first", severity="warning")
            return
        specs = self.queue or []
        if not specs:
            spec = self._spec_or_explain()
            if spec is None:
                return
            specs = [spec]
        self.values = self.form_values()
        self.points, self._series_seen = [], []
        self.side_by_side = False
        self._fill_table()
        self.state = "running"
        self._title()
        self._run(specs)

    def action_stop(self) -> None:
        if self._sweep is not None and self.state == "running":
            self.state = "stopping"
            self._sweep.cancel()
            self._title()

    @work(exclusive=True, group="memory", exit_on_error=False)
    async def _run(self, specs: list) -> None:
        from xferscope.memory.runner import MemRun

        for spec in specs:
            if self.state != "running":
                break
            try:
                self._sweep = await asyncio.to_thread(MemRun, spec)
                self._environment = self._sweep.result.environment  # filled as the sweep starts
                async for point in self._sweep:
                    self.post_message(MemPointMeasured(point))
            except XferscopeError as exc:
                partial = getattr(exc, "result", None)
                self.post_message(
                    MemSweepFailed(
                        str(exc),
                        tuple(getattr(exc, "detail", ()) or ()),
                        partial if partial is not None and partial.points else None,
                    )
                )
                return
            except Exception as exc:  # the engine's bug: say so, keep the console
                self.post_message(MemSweepFailed(f"memory sweep failed: {exc!r}"))
                return
            self.post_message(MemSweepFinished(self._sweep.result))
        self._sweep = None

    def on_mem_point_measured(self, message: MemPointMeasured) -> None:
        self.query_one("#mem-notes", Static).set_class(False, "-failed")
        point = message.point
        self.points.append(point)
        if point.traffic == IDLE and point.cpu_node is None:
            self.query_one("#mem-notes", Static).update(Text(idle_note(self.points)))
        else:
            key = series_key(point)
            if key not in self._series_seen:
                self._series_seen.append(key)
            self._fill_table()
        self._draw()

    def _caches(self) -> list:
        """The cache sizes the engine read from sysfs for this sweep (empty before it said)."""
        return list(self._environment.get("caches") or [])

    def _fill_table(self) -> None:
        """This sweep's table (MLC's loaded-latency columns, the max-bandwidth table, the cache curve, the NUMA
        matrix), or every result side by side."""
        table = self.query_one("#mem-table", DataTable)
        panel = self.query_one("#mem-table-panel")
        table.clear(columns=True)
        panel.styles.width = TABLE_WIDTH["side" if self.side_by_side and self.results else self._table_kind()]
        if self.side_by_side and self.results:
            from xferscope.memory.report import side_by_side

            headers, rows = side_by_side(self.results)
            _fill(table, ["", *(f"{i + 1} {h}" for i, h in enumerate(headers[1:]))], rows)
            panel.border_title = f"{len(self.results)} results side by side (v: this sweep)"
            return
        shown = [p for p in self.points if not (p.traffic == IDLE and p.cpu_node is None)]
        matrix = [p for p in shown if p.cpu_node is not None]
        curve = [p for p in shown if p.traffic == CURVE]
        peak = [p for p in shown if p.latency_ns is None and p.cpu_node is None]
        if matrix:
            headers, rows = matrix_rows(matrix)
            _fill(table, headers, rows)
            panel.border_title = "NUMA matrix: latency (ns), read bandwidth (MB/s)"
            return
        if curve:
            rows = [
                [Text(c, style="dim") if row[0].startswith("──") else c for c in row]
                for row in curve_rows(curve, self._caches())
            ]
            _fill(table, ["Size", "Latency (ns)", "Level"], rows)
            table.scroll_end(animate=False)
            panel.border_title = "Curve" + (f", {curve[0].locality} locality" if curve[0].locality else "")
            return
        if peak:
            _fill(table, ["Traffic", "Bandwidth (MB/sec)"], peak_rows(peak))
            panel.border_title = "Maximum bandwidth"
            return
        several = len(self._series_seen) > 1
        loaded = []
        for p in shown:
            key = series_key(p)
            color = PALETTE[self._series_seen.index(key) % len(PALETTE)]
            loaded.append([*((Text(key, style=color),) if several else ()), *mlc_row(p)])
        _fill(table, [*(("Series",) if several else ()), *TABLE_HEADERS], loaded)
        table.scroll_end(animate=False)
        locality = next((f", {p.locality} locality" for p in shown if p.locality), "")
        panel.border_title = (
            "Loaded latency" if not several else f"Loaded latency, {len(self._series_seen)} curves"
        ) + locality

    def _table_kind(self) -> str:
        shown = [p for p in self.points if not (p.traffic == IDLE and p.cpu_node is None)]
        if any(p.cpu_node is not None for p in shown):
            return "matrix"
        if any(p.traffic == CURVE for p in shown):
            return "curve"
        if any(p.latency_ns is None for p in shown):
            return "peak"
        return "loaded"

    def action_open_results(self) -> None:
        self.app.ask_open_results()

    def action_toggle_side_by_side(self) -> None:
        if not self.results:
            self.notify("no finished or opened memory results yet: run a sweep (r) or open one (o)")
            return
        self.side_by_side = not self.side_by_side
        self._fill_table()

    def add_results(self, results: list, source: str) -> None:
        """Results opened from a file: shown side by side with the session's."""
        self.results.extend(results)
        self.side_by_side = True
        self._fill_table()
        self.query_one("#mem-notes", Static).update(
            Text(
                f"opened {len(results)} memory result{'s' if len(results) != 1 else ''} from {source}; "
                "v: this sweep / side by side",
                style="dim",
            )
        )

    def on_mem_sweep_finished(self, message: MemSweepFinished) -> None:
        self.results.append(message.result)
        if message.result.cancelled:
            self.state = "cancelled"
            self._title()
        from xferscope.memory.report import pages_text

        result = message.result
        notes = [idle_note(result.points)]
        pages = pages_text(result)
        if pages:
            notes.append(f"pages: {pages}")
        notes.extend(result.notes)
        notes.extend(result.warnings[:2])
        self.query_one("#mem-notes", Static).update(Text(" · ".join(n for n in notes if n), style="dim"))
        if len(self.results) > 1 and not self.side_by_side:
            self.notify("v: every result of this session side by side", timeout=4)

    def on_mem_sweep_failed(self, message: MemSweepFailed) -> None:
        self.state = "failed"
        self._title()
        text = Text(message.reason, style="bold red")
        if message.result is not None:  # what it measured stays, marked incomplete, for export and side by side
            self.results.append(message.result)
            text.append(
                f"\nthe {len(message.result.points)} points measured are kept (incomplete); v: side by side",
                style="dim",
            )
        for line in message.detail[:FAILURE_LINES]:
            text.append("\n" + line, style="dim")
        notes = self.query_one("#mem-notes", Static)
        notes.set_class(True, "-failed")
        notes.update(text)
        self.notify(message.reason, title="memory sweep failed", severity="error", timeout=10)

    def on_worker_state_changed(self, event) -> None:
        if event.worker.group == "memory" and event.worker.is_finished and self.state in ("running", "stopping"):
            self.state = "cancelled" if self.state == "stopping" else "finished"
            self._title()

    # -------------------------------------------------------------- drawing
    def _draw(self) -> None:
        chart = self.query_one("#mem-chart", LineChart)
        curve = [p for p in self.points if p.traffic == CURVE and p.size_bytes and p.latency_ns]
        panel = self.query_one("#mem-curve")
        if curve:
            self._draw_curve(chart, curve)
            panel.border_title = "Latency ns vs working set"
            return
        chart.y_log, chart.x_format = False, _mb_s
        panel.border_title = "Latency ns vs bandwidth MB/s"
        groups: dict[str, list] = {}
        for p in self.points:
            if p.bandwidth_mb_s is not None and p.latency_ns is not None:
                groups.setdefault(series_key(p), []).append((p.bandwidth_mb_s, p.latency_ns))
        series = [
            Curve(
                k,
                sorted(v),
                PALETTE[self._series_seen.index(k) % len(PALETTE)] if k in self._series_seen else PALETTE[0],
            )
            for k, v in groups.items()
        ]
        top = max((x for s in series for x, _ in s.points), default=0.0)
        self.query_one("#mem-chart", LineChart).set_data(series, x_end=nice_ceiling(top) if top else None, x_start=0.0)
        legend = Text(no_wrap=True, overflow="ellipsis")
        for s in series:
            legend.append("■ ", style=s.color)
            legend.append(s.name + "  ")
        self.query_one("#mem-legend", Static).update(legend)

    def _draw_curve(self, chart: LineChart, curve: list) -> None:
        """lmbench's picture: latency against log2 of the working set, log latency, the caches marked."""
        import math

        from xferscope.units import format_size

        groups: dict[str, list] = {}
        for p in curve:
            groups.setdefault(f"stride {p.stride}", []).append((math.log2(p.size_bytes), p.latency_ns))
        series = [Curve(k, sorted(v), PALETTE[i % len(PALETTE)]) for i, (k, v) in enumerate(groups.items())]
        caches = self._caches()
        marks = [(math.log2(c["size"]), str(c["name"]).rstrip("d")) for c in caches if c.get("size")]
        planned = self._environment.get("curve_sizes")
        largest = max([p.size_bytes for p in curve] + list(planned or []))
        chart.y_log, chart.x_format = True, _size_of_log2
        chart.set_data(series, x_start=12.0, x_end=math.log2(largest), marks=marks)
        legend = Text(no_wrap=True, overflow="ellipsis")
        for s in series:
            legend.append("■ ", style=s.color)
            legend.append(s.name + "  ")
        legend.append("┊ " + ", ".join(f"{c['name']} {format_size(c['size'])}" for c in caches), style="dim")
        self.query_one("#mem-legend", Static).update(legend)

    def _title(self) -> None:
        v = self.values
        out = title_text("memory sweep", self.state)
        if self.points:
            out.append(f" · {len(self.points)} points")
        if self.state == "idle":
            out.append(f" · {v.mode} · press r to start", style="dim")
        self.query_one("#mem-title", Static).update(out)

    # ---------------------------------------------------------------- export
    def export_csv(self, directory: str) -> str:
        """The points measured so far, one row each (``xferscope mem --csv`` columns)."""
        from xferscope.memory.sweep import csv_text

        if not self.points:
            raise XferscopeError("no memory points measured yet: start a sweep (r) first")
        path = os.path.join(directory, "xferscope-mem-" + time.strftime("%Y%m%d-%H%M%S") + ".csv")
        write_output(path, csv_text(self.points))
        return path
