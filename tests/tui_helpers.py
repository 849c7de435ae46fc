"""Drive the console in tests: build it on temporary files, read the screen as text, collect its messages, and
wait for what the screen shows (never for a time: the console redraws on a timer, and a loaded machine is slow).

``screen_text`` reads Textual's compositor, which is not public API: pyproject pins Textual to one major version."""

from __future__ import annotations

import io
import time
from contextlib import asynccontextmanager

from rich.console import Console
from textual import events
from textual.notifications import Notify

from xferscope.app.app import ConsoleOptions, Machine, XferscopeApp
from xferscope.app.setup_model import FormValues
from xferscope.engines.registry import availability


def host_only_machine() -> Machine:
    """This machine's real availability, with the form offering the host path."""
    return Machine(gpus=[], no_gpu_reason="", availability=availability())


def make_app(tmp_dir, *, duration="0.4", size="16M", bs="1M", workers="1", start=False, **values) -> XferscopeApp:
    form = FormValues(
        paths=["host"], duration=duration, size=size, bs=bs, workers=workers, typed_path=str(tmp_dir), **values
    )
    return XferscopeApp(ConsoleOptions(form, host_only_machine(), start=start, export_to=str(tmp_dir)))


def screen_text(app) -> str:
    """What the terminal shows now, as plain text (modal screens over their background)."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        record=True,
        color_system=None,
        legacy_windows=False,
    )
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


class Messages:
    """A ``message_hook`` that keeps every message, by type."""

    def __init__(self):
        self.seen = []

    def __call__(self, message) -> None:
        self.seen.append(message)

    def of(self, kind) -> list:
        return [m for m in self.seen if isinstance(m, kind)]


async def wait_for(pilot, condition, timeout: float = 60.0, step: float = 0.1):
    """Let the app run until ``condition()`` holds; fail with the screen's text if it never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        await pilot.pause(step)
    raise AssertionError("timed out; the screen shows:\n" + screen_text(pilot.app))


def held_text(app, selector: str) -> str:
    """The text a Static or Label on the top screen holds, whole: what the app put there, wherever the terminal's
    width and a dialog's border would break its lines (a message naming a long path wraps)."""
    content = app.screen.query_one(selector).content
    return getattr(content, "plain", str(content))


def notified(messages: Messages) -> list[str]:
    """Every notification the app raised, in order, as "title: message" (or the message alone): what a toast
    says, not where the terminal wraps or shortens it."""
    return [f"{n.title}: {n.message}" if n.title else n.message for n in (m.notification for m in messages.of(Notify))]


async def until_shown(pilot, *texts: str, timeout: float = 60.0) -> str:
    """Let the app run until the screen shows every one of ``texts`` (each on one line of the screen: a text that
    can wrap is read whole with ``held_text``); the screen's text then."""
    seen: list[str] = []

    def showing() -> bool:
        text = screen_text(pilot.app)
        if all(t in text for t in texts):
            seen.append(text)
        return bool(seen)

    await wait_for(pilot, showing, timeout)
    return seen[0]


async def on_screen(pilot, kind: type, timeout: float = 60.0):
    """Let the app run until its screen is a ``kind``; that screen."""
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, kind), timeout)
    return pilot.app.screen


async def retype(pilot, selector: str, text: str) -> None:
    """Focus an input, clear it (end, ctrl+u) and paste ``text``, as a person would: a terminal delivers a
    paste as one event, where the pilot spends tens of milliseconds on each key it types."""
    widget = pilot.app.screen.query_one(selector)
    await wait_for(pilot, lambda: widget.region.area > 0, step=0.02)  # laid out: the click lands on it
    await pilot.click(selector)
    if not widget.has_focus:  # the click was taken elsewhere (a starved CPU's layout a frame behind): as a tab would
        widget.focus()
    await wait_for(pilot, lambda: widget.has_focus, step=0.02)
    await pilot.press("end", "ctrl+u")
    pilot.app.post_message(events.Paste(text))
    await wait_for(pilot, lambda: widget.value == text, step=0.02)


def toast_text(text: str) -> str:
    """The notifications on a screen (their lines joined, so wrapped paths read whole)."""
    parts = []
    for line in text.splitlines():
        if "▌" in line:
            parts.append(line[line.rindex("▌") + 1 :].rstrip().rstrip("│╮╯─").strip())
    return "".join(parts)


async def paste(pilot, selector: str, text: str) -> None:
    """Focus an input and put ``text`` in it at once (long paths, where typing key by key is slow)."""
    widget = pilot.app.screen.query_one(selector)
    widget.focus()
    widget.value = text
    await pilot.pause()


@asynccontextmanager
async def memory_view(tmp_dir, size: tuple[int, int] = (80, 24)):
    """The console opened on its Memory view: (app, pilot, messages seen)."""
    app = make_app(tmp_dir)
    msgs = Messages()
    async with app.run_test(size=size, message_hook=msgs) as pilot:
        await pilot.press("m")
        from xferscope.app.screens.memory import MemoryScreen

        await on_screen(pilot, MemoryScreen)
        await until_shown(pilot, "memory sweep", "Mode", "loaded", "Locality")  # drawn: its form takes input
        yield app, pilot, msgs
