"""What the workload screens share (Workload, Inference, Checkpoint): a run started from the form in a thread of its
own, its data set's progress, its ticks, stop (x), the console closing while it runs, a run that could not start,
the tables' headers and the summary under them. Each screen says how to make its session and state, and draws
them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, Static

from xferscope.app.messages import WorkloadEnded, WorkloadFailed, WorkloadPreparing, WorkloadTicked
from xferscope.app.screens.view import ConsoleScreen
from xferscope.errors import XferscopeError

#: how a run stopped while its data set was made ends (the generator's Interrupted)
STOPPED_WHILE_MAKING = "interrupted while creating the data set"


def run_bindings(name: str) -> list[Binding]:
    """A workload screen's keys: start, stop, open saved, leave a field (their ids named after the screen)."""
    return [
        Binding("r", "start", "Start", id=f"start-{name}"),
        Binding("x", "stop", "Stop", id=f"stop-{name}"),
        Binding("o", "open", "Open saved", id=f"open-{name}"),
        Binding("escape", "leave_field", "Leave field", show=False, id=f"leave-{name}-field"),
    ]


class WorkloadRunScreen(ConsoleScreen):
    #: what the screen runs, in its messages ("training run")
    what = "run"
    leaving = "stopping the run and removing what it made…"  # what the console says as it closes during a run
    #: the Static under the tables that shows a run's figures, or why it failed
    summary_id = ""
    #: the form: (control id, label, placeholder, value attribute) of its typed fields, the values' class, the
    #: Static that explains a bad value, SpecError field -> control, and how the values make a spec
    fields: tuple[tuple[str, str, str, str], ...] = ()
    form_class: Any = None
    error_id = ""
    field_control: dict[str, str] = {}
    build_spec: Any = None
    #: the run's state (start(spec), take(tick), finish(result), made)
    state_class: Any = None
    #: the ids' prefix ("wl-title", "wl-table", ...), the figures' panel (its id's middle and its title) and the
    #: session panel's title
    prefix = ""
    figures_panel = ("", "")
    session_title = ""
    #: the headers of the figures' table and of the session's ranking; what the summary says before a run
    table_headers: tuple[str, ...] = ()
    session_headers: tuple[str, ...] = ()
    idle_text = ""

    def mount_tables(self, name: str) -> None:
        """Once mounted: the screen among the console's work (``name``), its tables' headers, the first draw."""
        self.app.working[name] = self
        self.query_one(f"#{self.prefix}-table", DataTable).add_columns(*self.table_headers)
        self.query_one(f"#{self.prefix}-session", DataTable).add_columns(*self.session_headers)
        self.redraw()

    def summary_lines(self, result: Any) -> list[Any]:
        """A finished run's lines as the command prints them (the first in bold)."""
        raise NotImplementedError

    def _summary(self) -> None:
        out = Text()
        result = self.state.result
        if result is not None:
            lines = [line for line in self.summary_lines(result) if isinstance(line, str)]
            out.append(lines[0] + "\n", style="bold")
            for line in lines[1:]:
                out.append(line.strip() + "\n")
        elif self.status == "idle":
            out.append(self.idle_text, style="dim")
        self.query_one(f"#{self.summary_id}", Static).update(out)

    def compose(self) -> ComposeResult:
        p = self.prefix
        yield from self.compose_form(f"{p}-title")
        with Horizontal(id=f"{p}-body"):
            with Vertical(classes="panel", id=f"{p}-{self.figures_panel[0]}-panel") as v:
                v.border_title = self.figures_panel[1]
                yield DataTable(cursor_type="none", zebra_stripes=True, id=f"{p}-table")
            with Vertical(classes="panel", id=f"{p}-session-panel") as v:
                v.border_title = self.session_title
                yield DataTable(cursor_type="none", zebra_stripes=True, id=f"{p}-session")
        yield Static("", id=self.summary_id)
        yield Footer()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.status = "idle"
        self.session: Any = None  # the session in flight
        self.finished = threading.Event()
        self.finished.set()
        self.values = self.form_class()
        self.state = self.state_class()
        self.session_results: list = []  # every run of this console session that ended with figures, in order
        self.saved: list = []  # saved runs opened (o), as the screen's ranking takes them

    # ----------------------------------------------------------------- form
    def compose_form(self, title_id: str):
        """The title, the form's typed fields in two rows, and the line that explains a bad value."""
        from textual.containers import Horizontal
        from textual.widgets import Input, Label

        yield Static("", id=title_id, classes="screen-title")
        half = (len(self.fields) + 1) // 2
        for row in (self.fields[:half], self.fields[half:]):
            with Horizontal(classes="mem-form"):
                for cid, label, hint, attr in row:
                    yield Label(label, classes="mem-label")
                    yield Input(getattr(self.values, attr), placeholder=hint, compact=True, id=cid)
        yield Static("", id=self.error_id, classes="form-error")

    def form_values(self) -> Any:
        from textual.widgets import Input

        return self.form_class(**{attr: self.query_one(f"#{cid}", Input).value for cid, _, _, attr in self.fields})

    def spec_or_explain(self) -> Any:
        has_gpu = bool(getattr(self.app.options.machine, "gpus", None))
        build = type(self).build_spec
        return self.built_or_explained(lambda: build(self.form_values(), has_gpu), self.error_id, self.field_control)

    def action_leave_field(self) -> None:
        self.set_focus(None)

    @on(Input.Changed)
    def _edited(self) -> None:
        self.spec_or_explain()

    # the screen's own parts
    def make_session(self, spec: Any) -> Any:
        raise NotImplementedError

    def has_figures(self, result: Any) -> bool:
        """Whether an ended run measured anything (it then joins the session's ranking)."""
        raise NotImplementedError

    def draw_title(self) -> None:
        raise NotImplementedError

    def _table(self) -> None:
        raise NotImplementedError

    def _session(self) -> None:
        raise NotImplementedError

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
        self.state = self.state_class()
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
        session = self.session = self.make_session(spec)
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
        if self.has_figures(result):
            self.session_results.append(result)
        self.redraw()

    # ----------------------------------------------------------- saved ones
    def open_saved_runs(self, prompt: str, kinds: tuple[Any, ...]) -> None:
        """Ask for a saved run of one of the workloads ``kinds`` (``WorkloadKind``); its runs join the ranking,
        labelled by the file's name."""
        import os

        from xferscope.workloads.common.saved_kind import workload_of

        def runs(path: str) -> list:
            name = os.path.basename(path)
            return [(name, r) for r in workload_of(path, kinds).compare_saved([path]).results]

        self.open_saved(prompt, runs)

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
        self.query_one(f"#{self.summary_id}", Static).update(Text(message.reason, style="bold red"))
