"""The live view of the run in progress (or the last one): throughput, latency, CPU, GPU, workers."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer

from xferscope.app import figures
from xferscope.app.screens.view import ViewScreen
from xferscope.app.session import RunRecord
from xferscope.app.widgets.cpu import CpuPanel
from xferscope.app.widgets.error_panel import ErrorPanel
from xferscope.app.widgets.figures_line import FiguresText
from xferscope.app.widgets.gpu import GpuPanel
from xferscope.app.widgets.latency import LatencyPanel
from xferscope.app.widgets.throughput import ThroughputPanel
from xferscope.app.widgets.title import title_text
from xferscope.app.widgets.workers import WorkersPanel

STATE_WORDS = {
    "queued": "waiting",
    "preparing": "preparing",
    "running": "running",
    "finished": "finished",
    "stopped": "stopped",
    "failed": "failed",
    "skipped": "skipped",
}


def status_line(record: RunRecord | None, paused: bool) -> Text:
    if record is None:
        out = title_text()
        out.append(" · no run yet: press r to start the setup's runs, s for setup", style="dim")
        return out
    state = record.state
    if record.result is not None and record.result.status == "interrupted":
        state = "stopped"
    out = title_text(record.title, state, STATE_WORDS.get(state, state))
    if state == "preparing" and record.prepared_bytes[1]:
        done, total = record.prepared_bytes
        out.append(f" scratch file {figures.size(done)}/{figures.size(total)}")
    if record.labels:
        out.append(" · " + ", ".join(record.labels), style="dim")
    if paused:
        out.append("  DISPLAY PAUSED (space)", style="reverse")
    return out


class LiveScreen(ViewScreen):
    BINDINGS = [
        Binding("space", "pause", "Pause display", id="pause"),
        Binding("x", "stop", "Stop", id="stop"),
        Binding("r", "restart", "Restart", id="restart"),
    ]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.paused = False

    def compose(self) -> ComposeResult:
        yield FiguresText(id="live-status", classes="screen-title")
        with Horizontal(id="live-top"):
            yield ThroughputPanel(id="throughput", classes="panel")
            yield LatencyPanel(id="latency", classes="panel")
        with Horizontal(id="live-bottom"):
            yield CpuPanel(id="cpu", classes="panel")
            yield GpuPanel(id="gpu", classes="panel")
            yield WorkersPanel(id="workers", classes="panel")
        yield ErrorPanel(id="error")
        yield Footer()

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.refresh_view()

    def action_stop(self) -> None:
        self.app.stop_batch()

    def action_restart(self) -> None:
        self.app.restart_batch()

    def refresh_view(self) -> None:
        """Redraw from the app's records; called by the app's redraw timer while this screen shows."""
        app = self.app
        record = app.current_record
        self.query_one("#live-status", FiguresText).show(status_line(record, self.paused))
        if self.paused:  # the status line says so; the panels keep their last picture
            return
        self.query_one(ThroughputPanel).show(record)
        self.query_one(LatencyPanel).show(record)
        self.query_one(CpuPanel).show(record, app.console_log)
        self.query_one(GpuPanel).show(record)
        self.query_one(WorkersPanel).show(record)
        failed = app.last_failure
        self.query_one(ErrorPanel).show_error(
            failed.title if failed else None, failed.error if failed else None, failed.error_detail if failed else ()
        )
