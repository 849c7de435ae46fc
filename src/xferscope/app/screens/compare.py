"""Several runs or saved results side by side: the table, and overlaid charts on one shared scale."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Static

from xferscope.app import figures
from xferscope.app.braille import Curve
from xferscope.app.screens.view import ViewScreen
from xferscope.app.widgets.chart import PALETTE, LineChart
from xferscope.app.widgets.comparison import ComparisonTable, hosts_note, table_rows
from xferscope.app.widgets.rounds import RoundsTable
from xferscope.app.widgets.title import title_text
from xferscope.compare.rounds import RoundsComparison
from xferscope.engines.base import RunResult
from xferscope.units import GIB


def overlay(results: list[RunResult], value) -> list[Curve]:
    return [
        Curve(r.spec.name, [(s.t, value(s)) for s in r.samples], PALETTE[i % len(PALETTE)])
        for i, r in enumerate(results)
        if r.samples
    ]


def legend(results: list[RunResult], lead: str = "") -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(lead, style="dim")
    for i, r in enumerate(results):
        out.append("■ " if r.samples else "□ ", style=PALETTE[i % len(PALETTE)])
        out.append(f"{i + 1} {r.spec.name}" + (f" [{r.source}]" if r.source != "xferscope" else "") + "  ")
    return out


def latest_per_path(comp: RoundsComparison) -> list[RunResult]:
    """Each path's latest finished run, in the comparison's path order (what the charts overlay)."""
    out = []
    for slot in range(comp.paths):
        done = [run.result for run in comp.runs if run.slot == slot and run.result is not None]
        if done:
            out.append(done[-1])
    return out


class CompareScreen(ViewScreen):
    BINDINGS = [
        Binding("b", "baseline", "Baseline", id="baseline"),
        Binding("a", "toggle_rounds", "Rounds/all runs", id="toggle-rounds"),
        Binding("o", "open_results", "Open results", id="open-results"),
    ]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.all_runs = False  # with a comparison in rounds: show every run instead (a)

    def compose(self) -> ComposeResult:
        yield Static("[b]xferscope[/b] · comparison", id="compare-title", classes="screen-title")
        yield RoundsTable(id="rounds-table")
        yield Static("", id="rounds-notes")
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

    def _rounds_shown(self) -> bool:
        return self.app.comparison is not None and not self.all_runs

    def action_baseline(self) -> None:
        table = self.query_one(RoundsTable) if self._rounds_shown() else self.query_one(ComparisonTable)
        if table.row_count:
            if self._rounds_shown():
                self.app.comparison_baseline = table.cursor_row
            else:
                self.app.baseline = table.cursor_row
            self.refresh_view()

    def action_toggle_rounds(self) -> None:
        if self.app.comparison is None:
            self.app.notify("no comparison in rounds yet: tick several paths in the setup (s) and start (r)")
            return
        self.all_runs = not self.all_runs
        self.refresh_view()

    def action_open_results(self) -> None:
        self.app.ask_open_results()

    def refresh_view(self) -> None:
        rounds = self._rounds_shown()
        self.query_one(RoundsTable).display = rounds
        self.query_one("#rounds-notes").display = rounds
        self.query_one(ComparisonTable).display = not rounds
        if rounds:
            self._refresh_rounds()
        else:
            self._refresh_runs()

    def _refresh_rounds(self) -> None:
        app = self.app
        comp: RoundsComparison = app.comparison
        baseline = min(app.comparison_baseline, comp.paths - 1)
        self.query_one(RoundsTable).show(comp, baseline)
        title = title_text()
        done = comp.rounds_done()
        state = f"{done}/{comp.rounds} rounds" + (
            "" if done == comp.rounds else f", {len(comp.done())}/{len(comp.runs)} runs"
        )
        title.append(f" · comparison · {state} · ratio to {comp.labels[baseline]}, paired per round")
        self.query_one("#compare-title", Static).update(title)
        results = latest_per_path(comp)
        self.query_one("#compare-legend", Static).update(legend(results))
        self._draw_charts(results)
        notes = Text(no_wrap=False)
        for i, line in enumerate(comp.notes(baseline)):
            notes.append(("\n" if i else "") + line, style="dim" if i == 0 else "yellow")
        self.query_one("#rounds-notes", Static).update(notes)
        note = Text(no_wrap=False)
        note.append(app.console_cost_note(), style="dim")
        self.query_one("#compare-note", Static).update(note)

    def _draw_charts(self, results: list[RunResult]) -> None:
        which = "latest runs" if self._rounds_shown() else "all runs"
        self.query_one("#compare-throughput").border_title = f"Throughput, {which}"
        self.query_one("#compare-latency").border_title = f"p99 latency, {which}"
        end = max((r.spec.duration or 0 for r in results if r.samples), default=None)
        charts = list(self.query(LineChart))
        charts[0].set_data(overlay(results, lambda s: s.throughput_gib_s * GIB), end)
        charts[1].set_data(overlay(results, lambda s: s.latency_us.p99), end)

    def _refresh_runs(self) -> None:
        app = self.app
        results = app.compared_results()
        baseline = min(app.baseline, max(len(table_rows(results)) - 1, 0))
        table = self.query_one(ComparisonTable)
        table.show(results, baseline)
        title = title_text()
        if not results:
            title.append(" · comparison · nothing yet: finished runs and opened results (o) appear here")
        else:
            title.append(f" · comparison · ratio: MiB/s against row {baseline + 1} (*)")
            if table.caption:
                title.append(f" · all rows: {table.caption}")
        self.query_one("#compare-title", Static).update(title)
        self.query_one("#compare-legend", Static).update(legend(results))
        self._draw_charts(results)
        note = Text(no_wrap=False)
        hosts = hosts_note(results)
        if hosts:
            note.append(f"Per-host rows (↳) under each run over several hosts; {hosts}\n", style="yellow")
        note.append(app.console_cost_note(), style="dim")
        self.query_one("#compare-note", Static).update(note)
