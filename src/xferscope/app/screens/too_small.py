"""Shown instead of a garbled layout when the terminal is smaller than the console can use."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widget import Widget

MIN_WIDTH, MIN_HEIGHT = 60, 18


class SizeMessage(Widget):
    """Says the terminal's size as it is at each render."""

    def render(self) -> str:
        w, h = self.app.size
        return (
            f"Terminal too small: {w}x{h}.\nxferscope needs at least {MIN_WIDTH}x{MIN_HEIGHT} "
            "(80x24 is comfortable).\nEnlarge the window; runs keep going. q quits."
        )


class TooSmallScreen(ModalScreen[None]):
    BINDINGS = [Binding("q", "app.quit", "Quit", id="quit-small")]

    def compose(self) -> ComposeResult:
        yield SizeMessage(id="too-small")

    def on_resize(self) -> None:
        self.app.check_size()
