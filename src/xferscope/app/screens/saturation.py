"""SaturationRun: throughput against concurrency per block size, drawn as the knee searches measure, each knee
marked under the chart, and the verdict line of every search."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, Label, Static

from xferscope.app import figures
from xferscope.app.braille import Curve as Line
from xferscope.app.messages import SaturationEnded, SaturationFailed, SaturationProgressed
from xferscope.app.saturation_model import (
    FIELD_CONTROL,
    SaturateFormValues,
    SaturationState,
    build_plan,
    in_flight,
    knee_marks,
)
from xferscope.app.screens.view import ConsoleScreen
from xferscope.app.widgets.chart import GUTTER, PALETTE, LineChart
from xferscope.app.widgets.title import title_text
from xferscope.errors import XferscopeError

#: (control id, label, placeholder) of the typed fields, two rows (widths in the stylesheet)
FIELDS = (
    ("sat-paths", "Paths", "host,bounce-async"),
    ("sat-bs", "Blocks", "4K,1M"),
    ("sat-workers", "Max w", "16"),
    ("sat-qd", "Max qd", "64"),
    ("sat-target", "Target", "directory or file (empty: temporary)"),
    ("sat-size", "Size", "1G"),
    ("sat-seconds", "Run s", "1"),
    ("sat-rounds", "Rounds", "5"),
)
VALUE_OF = {
    "sat-paths": "paths",
    "sat-bs": "bs",
    "sat-workers": "max_workers",
    "sat-qd": "max_qd",
    "sat-target": "target",
    "sat-size": "size",
    "sat-seconds": "seconds",
    "sat-rounds": "max_rounds",
}
TABLE_HEADERS = ("Search", "in flight", "w", "qd", "GiB/s", "runs", "knee")


class SaturationScreen(ConsoleScreen):
    AUTO_FOCUS = ""  # no field takes the keys until it is clicked or tabbed to: r, x, o act on the view
    BINDINGS = [
        Binding("r", "start", "Start", id="start-saturation"),
        Binding("x", "stop", "Stop", id="stop-saturation"),
        Binding("o", "open", "Open saved", id="open-saturation"),
        Binding("escape", "leave_field", "Leave field", show=False, id="leave-saturation-field"),
    ]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.values = SaturateFormValues()
        self.state = SaturationState()
        self.status = "idle"
        self.saturation = None  # the SaturationRun in flight
        self.base = None  # a profile's fields the form does not show
        self.source = ""  # a saved saturation shown

    def compose(self) -> ComposeResult:
        yield Static("", id="sat-title", classes="screen-title")
        for row in (FIELDS[:4], FIELDS[4:]):
            with Horizontal(classes="mem-form"):
                for cid, label, hint in row:
                    yield Label(label, classes="mem-label")
                    yield Input(getattr(self.values, VALUE_OF[cid]), placeholder=hint, compact=True, id=cid)
        yield Static("", id="sat-error", classes="form-error")
        with Horizontal(id="sat-body"):
            with Vertical(classes="panel", id="sat-curve") as v:
                v.border_title = "Throughput vs concurrency (in flight, log scale); ▲ knee"
                yield LineChart(
                    figures.rate_unit,
                    empty="press r to search: points appear as they are measured",
                    x_format=in_flight,
                    id="sat-chart",
                )
                yield Static("", id="sat-knees")
                yield Static("", id="sat-legend")
            with Vertical(classes="panel", id="sat-table-panel") as v:
                v.border_title = "Points"
                yield DataTable(cursor_type="none", zebra_stripes=True, id="sat-table")
        yield Static("", id="sat-verdicts")
        yield Footer()

    def on_mount(self) -> None:
        self.app.working["saturation"] = self
        self.query_one("#sat-table", DataTable).add_columns(*TABLE_HEADERS)
        self._redraw()

    def on_resize(self, event) -> None:
        super().on_resize(event)
        self.call_after_refresh(self._marks)

    # ----------------------------------------------------------------- form
    def form_values(self) -> SaturateFormValues:
        return SaturateFormValues(**{VALUE_OF[cid]: self.query_one(f"#{cid}", Input).value for cid, *_ in FIELDS})

    def load_plan(self, plan) -> None:
        """Show a saturate profile's plan in the form; start runs it."""
        self.values = SaturateFormValues.from_plan(plan)
        self.base = plan.base
        with self.prevent(Input.Changed):
            for cid, *_ in FIELDS:
                self.query_one(f"#{cid}", Input).value = getattr(self.values, VALUE_OF[cid])

    def _plan_or_explain(self):
        return self.built_or_explained(lambda: build_plan(self.form_values(), self.base), "sat-error", FIELD_CONTROL)

    @on(Input.Changed)
    def _edited(self) -> None:
        self._plan_or_explain()

    def action_leave_field(self) -> None:
        self.set_focus(None)

    # ----------------------------------------------------------- searching
    @on(Input.Submitted)
    def action_start(self) -> None:
        if self.status in ("running", "stopping"):
            self.notify("a saturation is running: stop it (x) first", severity="warning")
            return
        if getattr(self.app, "batch", None) is not None:
            self.notify("a run is in progress: stop it first (l, then x)", severity="warning")
            return
        plan = self._plan_or_explain()
        if plan is None:
            return
        from xferscope.engines.registry import unavailable_reason

        for path in dict.fromkeys(s.path for s in plan.series()):
            reason = unavailable_reason(path)
            if reason:
                self.notify(f"{path}: {reason}", title="cannot run here", severity="error", timeout=10)
                return
        self.values = self.form_values()
        self.state = SaturationState()
        self.source = ""
        self.status = "running"
        self.set_focus(None)
        self._redraw()
        self._run(plan)

    def action_stop(self) -> None:
        if self.saturation is not None and self.status == "running":
            self.status = "stopping"
            self.saturation.stop()
            self._title()

    #: what the console says as it closes with a saturation running
    leaving = "stopping the saturation and removing its scratch files…"

    @property
    def busy(self) -> bool:
        return self.saturation is not None

    def stop_and_wait(self, timeout: float = 30.0) -> None:
        """Stop a saturation in flight and wait until its scratch files are removed (the console closes)."""
        saturation = self.saturation
        if saturation is not None:
            saturation.stop()
            saturation.finished.wait(timeout)

    @work(thread=True, exclusive=True, group="saturation", exit_on_error=False)
    def _run(self, plan) -> None:
        from xferscope.saturate.execute import LocalRunner, SaturationRun

        saturation = SaturationRun(plan, LocalRunner(), listener=lambda e: self.post_message(SaturationProgressed(e)))
        self.saturation = saturation
        try:
            outcome = saturation.run()
        except XferscopeError as exc:
            self.post_message(SaturationFailed(str(exc)))
            return
        except Exception as exc:  # xferscope's bug: say so, keep the console
            self.post_message(SaturationFailed(f"the saturation failed: {exc!r}"))
            return
        finally:
            self.saturation = None
        self.post_message(SaturationEnded(outcome))

    def on_saturation_progressed(self, message: SaturationProgressed) -> None:
        self.state.take(message.event)
        self._redraw()

    def on_saturation_ended(self, message: SaturationEnded) -> None:
        outcome = message.outcome
        self.state.finish(outcome)
        self.status = "stopped" if outcome.stopped == "interrupted" else "failed" if outcome.failed else "finished"
        if outcome.failed:
            self.notify(outcome.stopped or "a run failed", title="saturation stopped", severity="error", timeout=10)
        self._redraw()

    def on_saturation_failed(self, message: SaturationFailed) -> None:
        self.status = "failed"
        self.notify(message.reason, title="saturation failed", severity="error", timeout=10)
        self._redraw()
        self.query_one("#sat-verdicts", Static).update(Text(message.reason, style="bold red"))

    # ----------------------------------------------------------- saved ones
    def action_open(self) -> None:
        from xferscope.app.screens.dialogs import TextPrompt
        from xferscope.saturate.record import load_saturation

        loaded: list = []

        def check(path: str) -> str | None:
            try:
                loaded.append(load_saturation(path))
            except XferscopeError as exc:
                return str(exc)
            return None

        def done(path: str | None) -> None:
            if path and loaded:
                self.show_saved(loaded[-1], path)

        self.app.push_screen(
            TextPrompt(
                "Open a saved saturation (JSON from xferscope saturate --json)", "path of a .json file", check=check
            ),
            done,
        )

    def show_saved(self, outcome, source: str) -> None:
        if self.status in ("running", "stopping"):
            self.notify("a saturation is running: stop it (x) first", severity="warning")
            return
        self.state = SaturationState()
        self.state.load(outcome)
        self.status = "saved"
        self.source = source
        self._redraw()

    # --------------------------------------------------------------- drawing
    def _color(self, index: int) -> str:
        return PALETTE[index % len(PALETTE)]

    def _redraw(self) -> None:
        self._title()
        lines = [Line(v.series.label, v.curve(), self._color(i)) for i, v in enumerate(self.state.views)]
        self.query_one("#sat-chart", LineChart).set_data(lines, x_start=0.0)
        legend = Text(no_wrap=True, overflow="ellipsis")
        for i, v in enumerate(self.state.views):
            legend.append("■ ", style=self._color(i))
            knee = v.knee
            legend.append(f"{v.series.label}" + (f" knee {knee.short}" if knee else "") + "  ")
        self.query_one("#sat-legend", Static).update(legend)
        self._table()
        self._verdicts()
        self.call_after_refresh(self._marks)

    def _marks(self) -> None:
        chart = self.query_one("#sat-chart", LineChart)
        marks = []
        for i, v in enumerate(self.state.views):
            point = v.knee_point()
            if point is not None:
                marks.append((point[0], self._color(i)))
        cells = knee_marks(marks, chart._x_range, chart.size.width, GUTTER)
        line = [" "] * max(chart.size.width, 1)
        colors: dict[int, str] = {}
        for column, color in cells:
            if column < len(line):
                line[column] = "▲"
                colors[column] = color
        text = Text(no_wrap=True, overflow="ellipsis")
        for column, ch in enumerate(line):
            text.append(ch, style=colors.get(column))
        self.query_one("#sat-knees", Static).update(text if cells else Text(""))

    def _table(self) -> None:
        table = self.query_one("#sat-table", DataTable)
        table.clear()
        index = {v.series: i for i, v in enumerate(self.state.views)}
        for series, shape, point, mark in self.state.rows():
            table.add_row(
                Text(series.label, style=self._color(index[series])),
                str(shape.concurrency),
                str(shape.workers),
                str(shape.iodepth),
                f"{point.median:.3f}",
                str(len(point.measurements)),
                Text("▲" if mark else "", style=self._color(index[series])),
            )
        table.scroll_end(animate=False)

    def _verdicts(self) -> None:
        index = {v.series: i for i, v in enumerate(self.state.views)}
        text = Text()
        for series, line, advice in self.state.verdicts():
            if text:
                text.append("\n")
            text.append("■ ", style=self._color(index[series]))
            text.append(line)
            for a in advice:
                text.append(f"\n  {a}", style="dim")
        if not text and self.status == "idle":
            text.append(
                "each search doubles the I/Os in flight (one worker's queue, then workers) until the gain "
                "flattens, checks the limit, then bisects; the verdict says which ceiling binds",
                style="dim",
            )
        self.query_one("#sat-verdicts", Static).update(text)

    def _title(self) -> None:
        out = title_text("saturation", self.status)
        st = self.state
        if st.views:
            grid = sum(v.outcome.grid_points for v in st.views if v.outcome is not None)
            of = f" of {grid} grid" if grid and st.outcome is not None else ""
            out.append(f" · {st.points_measured}{of} points, {st.runs} runs")
        if st.current and self.status in ("running", "stopping"):
            out.append(f" · {st.current}", style="dim")
        if self.source:
            out.append(f" · {self.source}", style="dim")
        if self.status == "idle":
            out.append(" · press r to start, o to open a saved one", style="dim")
        self.query_one("#sat-title", Static).update(out)
