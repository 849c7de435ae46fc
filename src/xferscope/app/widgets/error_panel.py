"""Why a run failed, in the engine's words (and, when its process died, that process's last lines and
cuFile's log); hidden when nothing failed."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class ErrorPanel(Static):
    DEFAULT_CSS = """
    ErrorPanel { display: none; height: auto; max-height: 12; border: round $error; padding: 0 1; }
    ErrorPanel.-shown { display: block; }
    """

    def __init__(self, **kwargs):
        super().__init__("", **kwargs)
        self.border_title = "Run failed"
        self._shown: tuple = (None, None, ())

    def show_error(self, title: str | None, reason: str | None, detail: list[str] | tuple[str, ...] = ()) -> None:
        """``detail``: more lines under the reason, dimmed (the first ones: a fault's first line and the
        innermost frames of the thread that faulted)."""
        if (title, reason, tuple(detail)) == self._shown:
            return
        self._shown = (title, reason, tuple(detail))
        if not reason:
            self.set_class(False, "-shown")
            return
        self.border_title = f"Run failed: {title}" if title else "Run failed"
        text = Text(reason)
        for line in list(detail)[:8]:
            text.append("\n" + line, style="dim")
        self.update(text)
        self.set_class(True, "-shown")
