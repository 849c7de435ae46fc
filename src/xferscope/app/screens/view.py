"""Base screens: every console screen watches the terminal size; views are redrawn by the app's timer."""

from __future__ import annotations

from textual import events
from textual.screen import Screen


class ConsoleScreen(Screen):
    """Tells the app when the terminal changes size (it covers a too-small terminal with a message)."""

    def on_resize(self, event: events.Resize) -> None:
        self.app.check_size()


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
