"""Why a run failed, in the engine's words; hidden when nothing failed."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class ErrorPanel(Static):
    DEFAULT_CSS = """
    ErrorPanel { display: none; height: auto; max-height: 6; border: round $error; padding: 0 1; }
    ErrorPanel.-shown { display: block; }
    """

    def __init__(self, **kwargs):
        super().__init__("", **kwargs)
        self.border_title = "Run failed"
        self._shown: tuple[str | None, str | None] = (None, None)

    def show_error(self, title: str | None, reason: str | None) -> None:
        if (title, reason) == self._shown:
            return
        self._shown = (title, reason)
        if not reason:
            self.set_class(False, "-shown")
            return
        self.border_title = f"Run failed: {title}" if title else "Run failed"
        self.update(Text(reason))
        self.set_class(True, "-shown")
