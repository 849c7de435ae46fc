"""`xferscope tui` (the default): opens the Textual console. Textual is imported only here, lazily."""
from __future__ import annotations


def open_console(**options) -> int:
    raise SystemExit("xferscope: the console is not built yet")


def register(app):
    pass
