"""The first line of every view: ``xferscope · VIEW · STATUS``, the status coloured by what it means."""

from __future__ import annotations

from rich.text import Text

#: a status word's colour (any other: bold)
STATUS_STYLES = {"running": "bold green", "failed": "bold red", "stopped": "bold yellow", "cancelled": "bold yellow"}


def title_text(view: str | None = None, status: str | None = None, word: str | None = None) -> Text:
    """One line, cut with an ellipsis where the screen is narrow: the name, the view, and its status (shown as
    ``word`` where given); callers append the view's own facts."""
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("xferscope", style="bold")
    if view is not None:
        out.append(f" · {view}")
    if status is not None:
        out.append(" · ")
        out.append(word or status, style=STATUS_STYLES.get(status, "bold"))
    return out
