"""The console's screen of a workload (Workload, Inference, Checkpoint, and whatever a package declares next): what
it shows is its view (``workloads.common.console_view.ConsoleView``, declared in the workload's package), this
screen draws it: the form, a run started from it in a thread of its own, its data set's progress, its ticks, stop
(x), saved runs opened (o), the console closing while it runs, a run that could not start, the figures' table, the
session's runs ranked beside and the summary under them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, Label, Static

from xferscope.app.messages import WorkloadEnded, WorkloadFailed, WorkloadPreparing, WorkloadTicked
from xferscope.app.screens.view import ConsoleScreen
from xferscope.app.widgets.title import title_text
from xferscope.errors import XferscopeError
from xferscope.workloads.common.console_view import Cell, ConsoleView

#: how a run stopped while its data set was made ends (the generator's Interrupted)
STOPPED_WHILE_MAKING = "interrupted while creating the data set"


def _cell(cell: Cell) -> str | Text:
    return cell if isinstance(cell, str) else Text.assemble(*cell, no_wrap=True)


class WorkloadScreen(ConsoleScreen):
    """A workload's view (``view``, declared in its package): its form, its figures' table, the session's runs ranked
    beside, the summary under them."""

    AUTO_FOCUS = ""
    BINDINGS = [
        Binding("r", "start", "Start", id="start-workload-run"),
        Binding("x", "stop", "Stop", id="stop-workload-run"),
        Binding("o", "open", "Open saved", id="open-saved-workload-run"),
        Binding("escape", "leave_field", "Leave field", show=False, id="leave-workload-field"),
    ]

    def __init__(self, view: ConsoleView, **kwargs):
        super().__init__(**kwargs)
        self.view = view
        self.status = "idle"
        self.session: Any = None  # the session in flight
        self.finished = threading.Event()
        self.finished.set()
        self.values = view.form()
        self.state = view.state()
        self.session_results: list = []  # every run of this console session that ended with figures, in order
        self.saved: list = []  # saved runs opened (o), as the view's ranking takes them

    @property
    def what(self) -> str:
        return self.view.what

    @property
    def leaving(self) -> str:
        return self.view.leaving

    def on_mount(self) -> None:
        """The screen among the console's work, its tables' headers, the first draw."""
        self.app.working[self.view.name] = self
        self.query_one(f"#{self.view.prefix}-table", DataTable).add_columns(*self.view.table_headers)
        self.query_one(f"#{self.view.prefix}-session", DataTable).add_columns(*self.view.session_headers)
        self._fit()
        self.redraw()

    def on_resize(self, event) -> None:
        super().on_resize(event)
        self._fit()

    def _fit(self) -> None:
        """Narrower than the view asks, its session's runs are left out (its figures need the width)."""
        panel = self.query_one(f"#{self.view.prefix}-session-panel")
        panel.display = self.app.size.width >= self.view.session_min_width

    def _summary(self) -> None:
        """A finished run's lines as the command prints them (the first in bold), or what the view is for."""
        out = Text()
        result = self.state.result
        if result is not None:
            lines = [line for line in self.view.summary(result) if isinstance(line, str)]
            out.append(lines[0] + "\n", style="bold")
            for line in lines[1:]:
                out.append(line.strip() + "\n")
        elif self.status == "idle":
            out.append(self.view.idle_text, style="dim")
        self.query_one(f"#{self.view.prefix}-summary", Static).update(out)

    def compose(self) -> ComposeResult:
        """The title, the form's typed fields in two rows and the line that explains a bad value, the figures' table
        and the session's ranking side by side, the summary."""
        p, view = self.view.prefix, self.view
        yield Static("", id=f"{p}-title", classes="screen-title")
        half = (len(view.fields) + 1) // 2
        for row in (view.fields[:half], view.fields[half:]):
            with Horizontal(classes="mem-form"):
                for f in row:
                    yield Label(f.label, classes="mem-label")
                    yield Input(getattr(self.values, f.attr), placeholder=f.hint, compact=True, id=f.id)
        yield Static("", id=f"{p}-error", classes="form-error")
        with Horizontal(id=f"{p}-body"):
            with Vertical(classes="panel", id=f"{p}-{view.figures_panel[0]}-panel") as v:
                v.border_title = view.figures_panel[1]
                yield DataTable(cursor_type="none", zebra_stripes=True, id=f"{p}-table")
            with Vertical(classes="panel", id=f"{p}-session-panel") as v:
                v.border_title = view.session_title
                yield DataTable(cursor_type="none", zebra_stripes=True, id=f"{p}-session")
        yield Static("", id=f"{p}-summary")
        yield Footer()

    # ----------------------------------------------------------------- form
    def form_values(self) -> Any:
        return self.view.form(**{f.attr: self.query_one(f"#{f.id}", Input).value for f in self.view.fields})

    def spec_or_explain(self) -> Any:
        has_gpu = bool(getattr(self.app.options.machine, "gpus", None))
        view = self.view
        return self.built_or_explained(
            lambda: view.build_spec(self.form_values(), has_gpu), f"{view.prefix}-error", view.field_control
        )

    def action_leave_field(self) -> None:
        self.set_focus(None)

    @on(Input.Changed)
    def _edited(self) -> None:
        """A bad value explained as it is typed; the title and the ranking follow the form (the Inference view's
        Kind)."""
        self.spec_or_explain()
        self.draw_title()
        self._session()

    # -------------------------------------------------------------- drawing
    def draw_title(self) -> None:
        t = self.view.title(self.state, self.status, self.form_values())
        out = title_text(t.heading, t.status)
        for text, style in t.facts:
            out.append(text, style=style)
        self.query_one(f"#{self.view.prefix}-title", Static).update(out)

    def _fill(self, which: str, rows: list) -> None:
        table = self.query_one(f"#{self.view.prefix}-{which}", DataTable)
        table.clear()
        for row in rows:
            table.add_row(*map(_cell, row))

    def _table(self) -> None:
        self._fill("table", self.view.table_rows(self.state))

    def _session(self) -> None:
        rows = self.view.session_rows(self.session_results, self.saved, self.state, self.status, self.form_values())
        self._fill("session", rows)

    def redraw(self) -> None:
        self.draw_title()
        self._table()
        self._session()
        self._summary()

    # ----------------------------------------------------------- running
    @on(Input.Submitted)
    def action_start(self) -> None:
        if self.status in ("preparing", "running", "stopping"):
            self.notify(f"a {self.what} is going: stop it (x) first", severity="warning")
            return
        if getattr(self.app, "batch", None) is not None:
            self.notify("a run is in progress: stop it first (l, then x)", severity="warning")
            return
        spec = self.spec_or_explain()
        if spec is None:
            return
        self.values = self.form_values()
        self.state = self.view.state()
        self.state.start(spec)
        self.status = "preparing"
        self.set_focus(None)
        self.finished.clear()
        self.redraw()
        self.run_worker(
            lambda: self._run(spec), thread=True, exclusive=True, group=self.id or self.what, exit_on_error=False
        )

    def action_stop(self) -> None:
        if self.session is not None and self.status in ("preparing", "running"):
            self.status = "stopping"
            self.session.stop()
            self.draw_title()

    @property
    def busy(self) -> bool:
        return self.session is not None

    def stop_and_wait(self, timeout: float = 30.0) -> None:
        """Stop a run in flight and wait until its data set is removed (the console closes)."""
        session = self.session
        if session is not None:
            session.stop()
        self.finished.wait(timeout)

    def _run(self, spec: Any) -> None:
        session = self.session = self.view.session(spec)
        try:
            session.prepare(lambda done, total: self.post_message(WorkloadPreparing(done, total)))
            result = session.run(on_tick=lambda tick: self.post_message(WorkloadTicked(tick)))
        except XferscopeError as exc:
            self.post_message(WorkloadFailed(str(exc)))
            return
        except Exception as exc:  # xferscope's bug: say so, keep the console
            self.post_message(WorkloadFailed(f"the {self.what} failed: {exc!r}"))
            return
        finally:
            try:
                session.close()
            finally:
                self.session = None
                self.finished.set()
        self.post_message(WorkloadEnded(result))

    def on_workload_preparing(self, message: WorkloadPreparing) -> None:
        self.state.made = (message.done, message.total)
        self.draw_title()

    def on_workload_ticked(self, message: WorkloadTicked) -> None:
        if self.status == "preparing":
            self.status = "running"
        self.state.take(message.tick)
        self.redraw()

    def on_workload_ended(self, message: WorkloadEnded) -> None:
        """A run ended with its record: the state finished, its status, a failure told; with figures, it joins the
        session's ranking."""
        result = message.result
        self.state.finish(result)
        self.status = {"ok": "finished", "interrupted": "stopped"}.get(result.status, "failed")
        if result.status == "failed":
            self.notify(result.error or "the run failed", title=f"{self.what} failed", severity="error", timeout=10)
        if self.view.has_figures(result):
            self.session_results.append(result)
        self.redraw()

    # ----------------------------------------------------------- saved ones
    def action_open(self) -> None:
        """A saved run (or runs) of the view's workload joins the session's ranking, shown even where narrow."""

        def show() -> None:
            self.query_one(f"#{self.view.prefix}-session-panel").display = True

        self.open_saved(*self.view.saved, show)

    def open_saved(self, prompt: str, load: Callable[[str], list], then: Callable[[], None] | None = None) -> None:
        """Ask for a saved file; what ``load`` reads from it joins ``saved`` (a file it refuses: its one line under
        the field)."""
        from xferscope.app.screens.dialogs import TextPrompt

        loaded: list = []

        def check(path: str) -> str | None:
            try:
                loaded.append(load(path))
            except XferscopeError as exc:
                return str(exc)
            return None

        def done(path: str | None) -> None:
            if path and loaded:
                self.saved.extend(loaded[-1])
                if then is not None:
                    then()
                self._session()

        self.app.push_screen(TextPrompt(prompt, "path of a .json file", check=check), done)

    def on_workload_failed(self, message: WorkloadFailed) -> None:
        self.status = "stopped" if message.reason.endswith(STOPPED_WHILE_MAKING) else "failed"
        self.notify(message.reason, title=self.what, severity="error", timeout=10)
        self.redraw()
        self.query_one(f"#{self.view.prefix}-summary", Static).update(Text(message.reason, style="bold red"))
