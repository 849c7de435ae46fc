"""`?`: the keys of the screen underneath, and what the figures mean."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

ABOUT = (
    "Runs go one after another in a background thread; the display redraws four times a second from a "
    "bounded buffer, so it never slows the engine. Pausing the display (space) keeps measuring; stopping (x) "
    "keeps what was measured; e writes a CSV snapshot and says where. Throughput is in binary units "
    "(GiB/s, MiB/s). Process CPU is percent of one core and includes the console, whose own use has a line "
    "of its own over the same intervals, as do the engine's worker threads; system CPU is percent of all cores. "
    "A profile with several points or repetitions runs each point its repetitions in a row; g shows the grid: "
    "the median over repetitions with min, max and standard deviation, as lines or a heatmap (v)."
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="close-help")]

    def __init__(self, keys: list[tuple[str, str]]):
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, description in self.keys:
            table.add_row(key, description)
        with VerticalScroll(classes="dialog dialog-wide", id="help"):
            yield Static("[b]Keys here[/b]")
            yield Static(table)
            yield Static(Text(ABOUT), id="help-about")
            yield Static("[dim]escape or ? closes[/dim]")

    def action_close(self) -> None:
        self.dismiss(None)
