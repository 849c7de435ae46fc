"""Small modal questions: a name or a path (checked in place), and a profile from the list."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

Check = Callable[[str], str | None]


class TextPrompt(ModalScreen[str | None]):
    """Ask for one line; ``check(value)`` returns the reason it is refused, shown under the field."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="cancel")]

    def __init__(self, title: str, placeholder: str = "", value: str = "", check: Check | None = None):
        super().__init__()
        self.title_text = title
        self.placeholder = placeholder
        self.value = value
        self.check = check

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Input(self.value, placeholder=self.placeholder, id="prompt-input")
            yield Static("", id="prompt-error", classes="form-error -shown")
            yield Label("[dim]enter: ok · escape: cancel[/dim]")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        problem = self.check(value) if self.check else None
        if problem:
            self.query_one("#prompt-error", Static).update(Text(problem))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ProfilePicker(ModalScreen[str | None]):
    """Pick a bundled or user profile, or type the path of a .toml file."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="cancel")]

    def __init__(self, profiles: list[tuple[str, str]], check: Check):
        super().__init__()
        self.profiles = profiles  # (name, one-line description)
        self.check = check

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label("Open a profile", classes="dialog-title")
            yield OptionList(
                *(Option(Text(f"{name}  {desc}"), id=name) for name, desc in self.profiles), id="profile-list"
            )
            yield Input(placeholder="or the path of a .toml file", id="profile-path")
            yield Static("", id="prompt-error", classes="form-error -shown")
            yield Label("[dim]enter: open · tab: list/path · escape: cancel[/dim]")

    def _try(self, value: str) -> None:
        problem = self.check(value)
        if problem:
            self.query_one("#prompt-error", Static).update(Text(problem))
            return
        self.dismiss(value)

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self._try(event.option.id or "")

    @on(Input.Submitted)
    def _typed(self, event: Input.Submitted) -> None:
        self._try(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
