"""Base screens: every console screen watches the terminal size; views are redrawn by the app's timer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widgets import Static

from xferscope.errors import SpecError


class ConsoleScreen(Screen):
    """Tells the app when the terminal changes size (it covers a too-small terminal with a message)."""

    def on_resize(self, event: events.Resize) -> None:
        self.app.check_size()

    def built_or_explained(
        self, build: Callable[[], Any], error_id: str, controls: dict[str, str], fallback: str | None = None
    ) -> Any:
        """``build()`` (a spec or plan from the screen's form), or None with its SpecError shown under the form
        (``#error_id``) and the control of the field it names (``controls``, else ``fallback``) marked."""
        error = self.query_one(f"#{error_id}", Static)
        for w in self.query(".-invalid-choice"):
            w.set_class(False, "-invalid-choice")
        try:
            built = build()
        except SpecError as exc:
            error.update(Text(str(exc)))
            error.set_class(True, "-shown")
            control = controls.get(exc.field, fallback)
            if control:
                self.query_one(f"#{control}").set_class(True, "-invalid-choice")
            return None
        error.set_class(False, "-shown")
        return built


class ViewScreen(ConsoleScreen):
    """``refresh_view()`` redraws from the app's state; ``ready`` once the whole tree is mounted."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.ready = False

    def on_mount(self) -> None:
        self.call_after_refresh(self._now_ready)

    def _now_ready(self) -> None:
        self.ready = True
        self.refresh_view()

    def on_screen_resume(self) -> None:
        if self.ready:
            self.refresh_view()

    def refresh_view(self) -> None:
        raise NotImplementedError
