"""A fixed-size text widget for figures redrawn several times a second."""

from __future__ import annotations

from textual.widgets import Static


class FiguresText(Static):
    """``show()`` repaints only when the text changed, and never asks for a new layout (its size is set
    by CSS), which is what keeps a steady redraw cheap."""

    def __init__(self, *args, **kwargs):
        super().__init__("", *args, **kwargs)
        self._shown = None

    def show(self, content) -> None:
        if content != self._shown:
            self._shown = content
            self.update(content, layout=False)
