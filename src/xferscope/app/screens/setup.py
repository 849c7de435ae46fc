"""Setup: choose what to measure; invalid choices are explained beside their control before anything runs."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, Checkbox, Footer, Input, Select, SelectionList, Static

from xferscope.app import setup_model
from xferscope.app.messages import SetupRefused
from xferscope.app.screens.view import ConsoleScreen
from xferscope.app.setup_model import FIELD_CONTROL, FormValues
from xferscope.app.widgets.setup_form import SetupForm
from xferscope.errors import SpecError
from xferscope.spec import RunSpec


class SetupScreen(ConsoleScreen):
    BINDINGS = [
        Binding("r", "start", "Start", id="start"),
        Binding("p", "save_profile", "Save profile", id="save-profile"),
        Binding("o", "open_profile", "Open profile", id="open-profile"),
        Binding("escape", "focus_start", "Leave field", show=False, id="leave-field"),
    ]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        #: the points of an opened profile, run as they are until the form is edited
        self.profile_points: list[RunSpec] | None = None
        self.profile_repetitions = 1
        self.profile_name: str | None = None
        #: rounds of a comparison (several paths) as the form says: (planned, the most with auto or None)
        self.rounds: tuple[int, int | None] = setup_model.rounds_plan("auto")

    def compose(self) -> ComposeResult:
        yield Static("[b]xferscope[/b] · setup", id="title", classes="screen-title")
        opts = self.app.options
        m = opts.machine
        yield SetupForm(opts.values, m.gpus, m.no_gpu_reason, m.availability, m.descriptions, id="setup-form")
        with Horizontal(id="setup-buttons"):
            yield Button("Start (r)", variant="success", id="start", compact=True)
            yield Button("Save profile (p)", id="save-profile", compact=True)
            yield Button("Open profile (o)", id="open-profile", compact=True)
        yield Footer()

    def on_mount(self) -> None:
        self.app.setup_screen = self
        self.query_one("#start", Button).focus()
        self._probe_mounts()

    @property
    def form(self) -> SetupForm:
        return self.query_one(SetupForm)

    @work(thread=True, exclusive=True, group="mounts", exit_on_error=False)
    def _probe_mounts(self) -> None:
        """Probing O_DIRECT creates a file in each mount: slow on network filesystems, so not on the UI."""
        scratch = setup_model.scratch_parent()
        mounts = setup_model.list_mounts()
        self.app.call_from_thread(self.form.set_mounts, scratch, mounts)

    # ------------------------------------------------------------ validation
    def specs(self, *, check_target: bool = False) -> list[RunSpec] | None:
        """The specs the form describes, or None after explaining the first problem beside its control."""
        if self.profile_points is not None:
            return list(self.profile_points)
        try:
            values = self.form.values()
            specs = setup_model.build_specs(values)
            self.rounds = setup_model.parse_rounds(values)
            if check_target:
                setup_model.check_target(specs[0])
        except SpecError as exc:
            control = FIELD_CONTROL.get(exc.field, "target")
            self.form.show_error(control, str(exc))
            self.post_message(SetupRefused(control, str(exc)))
            return None
        self.form.clear_errors()
        return specs

    @on(Input.Changed)
    @on(Select.Changed)
    @on(SelectionList.SelectedChanged)
    @on(Checkbox.Changed)
    def _edited(self) -> None:
        if self.profile_points is not None:
            self.profile_points = None
            self._note("")
        self.specs()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_start()

    @on(Button.Pressed, "#start")
    def action_start(self) -> None:
        specs = self.specs(check_target=True)
        if not specs:
            return
        if self.profile_points is None and len(specs) > 1:
            self.app.start_comparison(specs, *self.rounds)
        else:
            reps = self.profile_repetitions if self.profile_points is not None else 1
            self.app.start_batch(specs, reps)

    @on(Button.Pressed, "#save-profile")
    def action_save_profile(self) -> None:
        specs = self.specs()
        if specs:
            self.app.ask_save_profile(specs)

    @on(Button.Pressed, "#open-profile")
    def action_open_profile(self) -> None:
        self.app.ask_open_profile()

    def action_focus_start(self) -> None:
        self.query_one("#start", Button).focus()

    # -------------------------------------------------------------- profiles
    def load_profile(self, name: str, points: list[RunSpec], repetitions: int = 1) -> None:
        """Show a profile in the form; a grid that the form cannot show, or repetitions, run point by point
        as the profile says (drawn on the grid view, g)."""
        first = points[0]
        same_but_path = all(p.replace(path=first.path) == first for p in points)
        with self.prevent(Input.Changed, Select.Changed, SelectionList.SelectedChanged, Checkbox.Changed):
            self.form.load(FormValues.from_spec(first, list(dict.fromkeys(p.path for p in points))))
        self.profile_name = name
        self.profile_repetitions = repetitions
        if same_but_path and repetitions == 1:
            self.profile_points = None
            self._note(f"profile [b]{name}[/b]")
        else:
            self.profile_points = list(points)
            avail = self.app.options.machine.availability
            blocked = sum(1 for p in points if avail.get(p.path))
            cannot = f"; {blocked} use paths that cannot run here and will fail" if blocked else ""
            reps = f", {repetitions} repetitions each" if repetitions > 1 else ""
            self._note(
                f"profile [b]{name}[/b]: {len(points)} point{'s' if len(points) != 1 else ''}{reps} "
                f"run one after another, drawn on the grid view (g) "
                f"(the form shows the first; editing it replaces the profile){cannot}"
            )

    def _note(self, text: str) -> None:
        self.query_one("#profile-note", Static).update(text)
