"""Several runs or saved results side by side: the table, and overlaid charts on one shared scale."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Static

from xferscope.app import figures
from xferscope.app.braille import Series
from xferscope.app.screens.view import ViewScreen
from xferscope.app.widgets.chart import PALETTE, LineChart
from xferscope.app.widgets.comparison import ComparisonTable, hosts_note, table_rows
from xferscope.engines.base import RunResult
from xferscope.units import GIB


def overlay(results: list[RunResult], value) -> list[Series]:
    return [Series(r.spec.name, [(s.t, value(s)) for s in r.samples], PALETTE[i % len(PALETTE)])
            for i, r in enumerate(results) if r.samples]


def legend(results: list[RunResult]) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, r in enumerate(results):
        out.append("■ " if r.samples else "□ ", style=PALETTE[i % len(PALETTE)])
        out.append(f"{i + 1} {r.spec.name}" + (f" [{r.source}]" if r.source != "xferscope" else "") + "  ")
    return out


class CompareScreen(ViewScreen):
    BINDINGS = [
        Binding("b", "baseline", "Baseline", id="baseline"),
        Binding("o", "open_results", "Open results", id="open-results"),
    ]

    def compose(self) -> ComposeResult:
        yield Static("[b]xferscope[/b] · comparison", id="compare-title", classes="screen-title")
        yield ComparisonTable(id="compare-table")
        yield Static("", id="compare-legend")
        with Horizontal(id="compare-charts"):
            with Vertical(classes="panel", id="compare-throughput") as v:
                v.border_title = "Throughput, all runs"
                yield LineChart(figures.rate_unit, empty="no time series (saved results carry none)")
            with Vertical(classes="panel", id="compare-latency") as v:
                v.border_title = "p99 latency, all runs"
                yield LineChart(figures.latency_unit, empty="no time series (saved results carry none)")
        yield Static("", id="compare-note")
        yield Footer()

    def action_baseline(self) -> None:
        table = self.query_one(ComparisonTable)
        if table.row_count:
            self.app.baseline = table.cursor_row
            self.refresh_view()

    def action_open_results(self) -> None:
        self.app.ask_open_results()

    def refresh_view(self) -> None:
        app = self.app
        results = app.compared_results()
        baseline = min(app.baseline, max(len(table_rows(results)) - 1, 0))
        table = self.query_one(ComparisonTable)
        table.show(results, baseline)
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append("xferscope", style="bold")
        if not results:
            title.append(" · comparison · nothing yet: finished runs and opened results (o) appear here")
        else:
            title.append(f" · comparison · ratio: MiB/s against row {baseline + 1} (*)")
            if table.caption:
                title.append(f" · all rows: {table.caption}")
        self.query_one("#compare-title", Static).update(title)
        self.query_one("#compare-legend", Static).update(legend(results))
        end = max((r.spec.duration or 0 for r in results if r.samples), default=None)
        charts = list(self.query(LineChart))
        charts[0].set_data(overlay(results, lambda s: s.throughput_gib_s * GIB), end)
        charts[1].set_data(overlay(results, lambda s: s.latency_us.p99), end)
        note = Text(no_wrap=False)
        hosts = hosts_note(results)
        if hosts:
            note.append(f"Per-host rows (↳) under each run over several hosts; {hosts}\n", style="yellow")
        note.append(app.console_cost_note(), style="dim")
        self.query_one("#compare-note", Static).update(note)
