"""Memory sweeps: latency against bandwidth drawn point by point, beside MLC's table."""
from __future__ import annotations

import asyncio
import os
import time

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, Label, Select, Static

from xferscope.app.braille import Series, nice_ceiling
from xferscope.app.messages import MemPointMeasured, MemSweepFailed, MemSweepFinished
from xferscope.app.mem_model import (MEM_FIELD_CONTROL, TABLE_HEADERS, MemFormValues, build_mem_spec, mlc_row,
                                     series_key)
from xferscope.app.screens.view import ConsoleScreen
from xferscope.app.widgets.chart import PALETTE, LineChart
from xferscope.engines.mem import IDLE
from xferscope.errors import SpecError, XferscopeError
from xferscope.safe_write import write_output

#: (control id, label, width, placeholder) of the typed fields
FIELDS = (
    ("mem-traffic", "Traffic", 10, "R,W6"),
    ("mem-stride", "Stride", 8, "64,256"),
    ("mem-seconds", "Point s", 6, "0.5"),
    ("mem-delays", "Delays", 22, "MLC's 19 delays"),
    ("mem-threads", "Threads", 6, "all"),
    ("mem-buffer", "Buffer", 6, "auto"),
)
VALUE_OF = {"mem-traffic": "traffic", "mem-stride": "stride", "mem-seconds": "seconds", "mem-delays": "delays",
            "mem-threads": "threads", "mem-buffer": "buffer"}


def _ns(max_ns: float) -> tuple[str, float]:
    return "ns", 1.0


def _mb_s(v: float) -> str:
    return f"{v / 1000:.0f}k" if v >= 10_000 else f"{v:.0f}"


class MemoryScreen(ConsoleScreen):
    BINDINGS = [
        Binding("r", "start", "Start sweep", id="start-sweep"),
        Binding("x", "stop", "Stop", id="stop-sweep"),
        Binding("escape", "leave_field", "Leave field", show=False, id="leave-mem-field"),
    ]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.values = MemFormValues()
        self.queue: list = []       # MemSpecs still to run (a profile's points)
        self.points: list = []      # MemPoints measured, in order
        self.results: list = []     # MemResults of finished sweeps
        self.state = "idle"
        self._sweep = None
        self._series_seen: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="mem-title", classes="screen-title")
        with Horizontal(classes="mem-form"):
            yield Label("Mode", classes="mem-label")
            yield Select([(m, m) for m in ("loaded", "idle", "peak")], value=self.values.mode,
                         allow_blank=False, compact=True, id="mem-mode")
            for cid, label, width, hint in FIELDS[:3]:
                yield Label(label, classes="mem-label")
                yield Input(getattr(self.values, VALUE_OF[cid]), placeholder=hint, compact=True, id=cid,
                            classes=f"w{width}")
        with Horizontal(classes="mem-form"):
            for cid, label, width, hint in FIELDS[3:]:
                yield Label(label, classes="mem-label")
                yield Input(getattr(self.values, VALUE_OF[cid]), placeholder=hint, compact=True, id=cid,
                            classes=f"w{width}")
        yield Static("", id="mem-error", classes="form-error")
        with Horizontal(id="mem-body"):
            with Vertical(classes="panel", id="mem-curve") as v:
                v.border_title = "Latency ns vs bandwidth MB/s"
                yield LineChart(_ns, empty="press r to sweep: points appear as they are measured",
                                x_format=_mb_s, id="mem-chart")
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
            Text(f"profile: {len(specs)} sweeps run one after another (editing the form replaces them)"))

    @on(Input.Changed)
    @on(Select.Changed)
    def _edited(self) -> None:
        self.queue = []
        self._spec_or_explain()

    def _spec_or_explain(self):
        error = self.query_one("#mem-error", Static)
        for w in self.query(".-invalid-choice"):
            w.set_class(False, "-invalid-choice")
        try:
            spec = build_mem_spec(self.form_values())
        except SpecError as exc:
            error.update(Text(str(exc)))
            error.set_class(True, "-shown")
            self.query_one(f"#{MEM_FIELD_CONTROL.get(exc.field, 'mem-mode')}").set_class(True, "-invalid-choice")
            return None
        error.set_class(False, "-shown")
        return spec

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
        from xferscope.engines.mem import MemSweep

        for spec in specs:
            if self.state != "running":
                break
            try:
                self._sweep = await asyncio.to_thread(MemSweep, spec)
                async for point in self._sweep:
                    self.post_message(MemPointMeasured(point))
            except XferscopeError as exc:
                self.post_message(MemSweepFailed(str(exc)))
                return
            except Exception as exc:  # the engine's bug: say so, keep the console
                self.post_message(MemSweepFailed(f"memory sweep failed: {exc!r}"))
                return
            self.post_message(MemSweepFinished(self._sweep.result))
        self._sweep = None

    def on_mem_point_measured(self, message: MemPointMeasured) -> None:
        point = message.point
        self.points.append(point)
        if point.traffic == IDLE:
            self.query_one("#mem-notes", Static).update(Text(f"idle latency {point.latency_ns:.1f} ns"
                                                             if point.latency_ns else ""))
        else:
            key = series_key(point)
            if key not in self._series_seen:
                self._series_seen.append(key)
            self._fill_table()
        self._draw()

    def _fill_table(self) -> None:
        """MLC's columns; a series column in front once there is more than one curve."""
        table = self.query_one("#mem-table", DataTable)
        several = len(self._series_seen) > 1
        table.clear(columns=True)
        table.add_columns(*(("Series",) if several else ()), *TABLE_HEADERS)
        for p in self.points:
            if p.traffic == IDLE:
                continue
            key = series_key(p)
            color = PALETTE[self._series_seen.index(key) % len(PALETTE)]
            table.add_row(*((Text(key, style=color),) if several else ()), *mlc_row(p))
        table.scroll_end(animate=False)
        self.query_one("#mem-table-panel").border_title = (
            "Loaded latency" if not several else f"Loaded latency, {len(self._series_seen)} curves")

    def on_mem_sweep_finished(self, message: MemSweepFinished) -> None:
        self.results.append(message.result)
        if message.result.cancelled:
            self.state = "cancelled"
            self._title()
        notes = []
        if message.result.idle_latency_ns is not None:
            notes.append(f"idle latency {message.result.idle_latency_ns:.1f} ns")
        if message.result.thp_coverage is not None:
            notes.append(f"huge pages {message.result.thp_coverage:.0%}")
        notes.extend(message.result.warnings[:2])
        self.query_one("#mem-notes", Static).update(Text(" · ".join(notes), style="dim"))

    def on_mem_sweep_failed(self, message: MemSweepFailed) -> None:
        self.state = "failed"
        self._title()
        self.query_one("#mem-notes", Static).update(Text(message.reason, style="bold red"))
        self.notify(message.reason, title="memory sweep failed", severity="error", timeout=10)

    def on_worker_state_changed(self, event) -> None:
        if event.worker.group == "memory" and event.worker.is_finished and self.state in ("running", "stopping"):
            self.state = "cancelled" if self.state == "stopping" else "finished"
            self._title()

    # -------------------------------------------------------------- drawing
    def _draw(self) -> None:
        groups: dict[str, list] = {}
        for p in self.points:
            if p.bandwidth_mb_s is not None and p.latency_ns is not None:
                groups.setdefault(series_key(p), []).append((p.bandwidth_mb_s, p.latency_ns))
        series = [Series(k, sorted(v), PALETTE[self._series_seen.index(k) % len(PALETTE)] if k in
                         self._series_seen else PALETTE[0]) for k, v in groups.items()]
        top = max((x for s in series for x, _ in s.points), default=0.0)
        self.query_one("#mem-chart", LineChart).set_data(series, x_end=nice_ceiling(top) if top else None,
                                                         x_start=0.0)
        legend = Text(no_wrap=True, overflow="ellipsis")
        for s in series:
            legend.append("■ ", style=s.color)
            legend.append(s.name + "  ")
        self.query_one("#mem-legend", Static).update(legend)

    def _title(self) -> None:
        v = self.values
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append("xferscope", style="bold")
        out.append(" · memory sweep · ")
        style = {"running": "bold green", "failed": "bold red", "cancelled": "bold yellow"}.get(self.state, "bold")
        out.append(self.state, style=style)
        if self.points:
            out.append(f" · {len(self.points)} points")
        if self.state == "idle":
            out.append(f" · {v.mode} · press r to start", style="dim")
        self.query_one("#mem-title", Static).update(out)

    # ---------------------------------------------------------------- export
    def export_csv(self, directory: str) -> str:
        """The points measured so far, one row each (``xferscope mem --csv`` columns)."""
        from xferscope.engines.mem import MemResult, csv_text

        if not self.points:
            raise XferscopeError("no memory points measured yet: start a sweep (r) first")
        path = os.path.join(directory, "xferscope-mem-" + time.strftime("%Y%m%d-%H%M%S") + ".csv")
        write_output(path, csv_text(MemResult(points=list(self.points))))
        return path
