"""The setup form: GPU, target, transfer paths, I/O pattern and sizes; errors shown beside their control."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Checkbox, Input, Label, Select, SelectionList, Static
from textual.widgets.selection_list import Selection

from xferscope.app.setup_model import DEFAULT_TARGET, FormValues, Mount, no_gpu_text, path_order
from xferscope.spec import IO_PATTERNS

#: (control id, label, placeholder) of the typed fields, in form order
TYPED = (
    ("bs", "Block size", "e.g. 4K, 64K, 1M"),
    ("split", "Split", "sub-requests, e.g. 4M; empty: none"),
    ("workers", "Workers", "threads, e.g. 4"),
    ("iodepth", "Queue depth", "I/O in flight per worker"),
    ("size", "File size", "scratch file size, e.g. 1G"),
    ("duration", "Duration", "seconds, e.g. 10 or 2m"),
    ("rounds", "Rounds", "several paths run in rounds: auto (3, more while undecided, up to 9) or e.g. 5"),
)
CONTROLS = ("gpu", "target", "paths", "io") + tuple(c for c, _, _ in TYPED)
SCRATCH_LABEL = "new temporary directory"


def _row(label: str, control, control_id: str) -> ComposeResult:
    with Horizontal(classes="form-row"):
        yield Label(label, classes="form-label")
        yield control
    yield Static("", id=f"error-{control_id}", classes="form-error")


class SetupForm(Horizontal):
    """``values()`` reads the form; ``load()`` fills it; ``show_error()`` explains a control."""

    def __init__(
        self,
        values: FormValues,
        gpus: list[tuple[str, int]],
        no_gpu_reason: str,
        availability: dict[str, str | None],
        descriptions: dict[str, str],
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._initial = values
        self._order = path_order(values.paths)  # the paths as listed, which is the order they run
        self._gpus = gpus
        self._no_gpu_reason = no_gpu_reason
        self._availability = availability
        self._descriptions = descriptions
        self._mounts: list[Mount] = []
        self._scratch: Mount | None = None
        #: (control, message) explained in the form now, or None
        self.error: tuple[str, str] | None = None

    def compose(self) -> ComposeResult:
        v = self._initial
        with VerticalScroll(id="setup-left"):
            if self._gpus:
                gpu = Select(
                    self._gpus,
                    value=v.gpu if v.gpu is not None else self._gpus[0][1],
                    allow_blank=False,
                    compact=True,
                    id="gpu",
                )
            else:
                gpu = Static(Text(no_gpu_text(self._no_gpu_reason)), id="gpu", classes="form-static")
            with Horizontal(classes="form-row -auto"):
                yield Label("GPU", classes="form-label")
                yield gpu
            yield Static("", id="error-gpu", classes="form-error")
            with Horizontal(classes="form-row"):
                yield Label("Target", classes="form-label")
                yield Select(
                    [(SCRATCH_LABEL, DEFAULT_TARGET)],
                    value=DEFAULT_TARGET,
                    allow_blank=False,
                    compact=True,
                    id="target",
                )
            yield Static("checking the machine's filesystems…", id="target-info", classes="form-info")
            with Horizontal(classes="form-row"):
                yield Label("or path", classes="form-label")
                yield Input(v.typed_path, placeholder="a file or directory", compact=True, id="target-path")
            yield Static("", id="error-target", classes="form-error")
            yield from _row(
                "I/O", Select([(p, p) for p in IO_PATTERNS], value=v.io, allow_blank=False, compact=True, id="io"), "io"
            )
            values = {
                "bs": v.bs,
                "split": v.split,
                "workers": v.workers,
                "iodepth": v.iodepth,
                "size": v.size,
                "duration": v.duration,
                "rounds": v.rounds,
            }
            for cid, label, hint in TYPED:
                yield from _row(label, Input(values[cid], placeholder=hint, compact=True, id=cid), cid)
        with Vertical(id="setup-right"):
            yield Label("Transfer paths ([b]space[/b] ticks)", classes="form-title")
            yield SelectionList(*self._path_choices(v.paths), compact=True, id="paths")
            yield Static("", id="error-paths", classes="form-error")
            yield Checkbox("through the page cache (no O_DIRECT)", v.buffered, compact=True, id="buffered")
            yield Static("", id="profile-note")

    def _path_choices(self, chosen: list[str]) -> list[Selection]:
        """Every path, listed in the order ticked ones run."""
        self._order = path_order(chosen)
        out = []
        for path in self._order:
            reason = self._availability.get(path)
            if reason:
                out.append(Selection(Text(f"{path}: {reason}", style="dim"), path, False, disabled=True))
            else:
                desc = self._descriptions.get(path, "")
                out.append(Selection(Text(f"{path}  {desc}".rstrip()), path, path in chosen))
        return out

    # ---------------------------------------------------------------- mounts
    def set_mounts(self, scratch: Mount | None, mounts: list[Mount]) -> None:
        """Offer the machine's mounts as targets (after they were probed for O_DIRECT)."""
        self._scratch, self._mounts = scratch, mounts
        select = self.query_one("#target", Select)
        current = select.value
        options = [(SCRATCH_LABEL, DEFAULT_TARGET)] + [(m.mountpoint, m.mountpoint) for m in mounts]
        with self.prevent(Select.Changed):
            select.set_options(options)
            select.value = current if any(value == current for _, value in options) else DEFAULT_TARGET
        self._describe_target()

    @on(Select.Changed, "#target")
    @on(Input.Changed, "#target-path")
    def _describe_target(self) -> None:
        """Filesystem, free space and O_DIRECT of the chosen target, under it."""
        info = self.query_one("#target-info", Static)
        if self.query_one("#target-path", Input).value.strip():
            info.update("the typed path is used; it is checked when the run starts")
            return
        value = self.query_one("#target", Select).value
        if value == DEFAULT_TARGET:
            mount = self._scratch
            text = f"in {mount.label}" if mount else ""
        else:
            mount = next((m for m in self._mounts if m.mountpoint == value), None)
            text = (mount.label + "; one scratch file per worker") if mount else ""
        info.update(Text(text))

    # ---------------------------------------------------------------- values
    def values(self) -> FormValues:
        gpu_widget = self.query_one("#gpu")
        gpu = gpu_widget.value if isinstance(gpu_widget, Select) else None
        return FormValues(
            paths=self._chosen_paths(),
            io=str(self.query_one("#io", Select).value),
            mount=str(self.query_one("#target", Select).value),
            typed_path=self.query_one("#target-path", Input).value,
            gpu=gpu if isinstance(gpu, int) else None,
            buffered=self.query_one("#buffered", Checkbox).value,
            base=self._initial.base,
            **{cid: self.query_one(f"#{cid}", Input).value for cid, _, _ in TYPED},
        )

    def _chosen_paths(self) -> list[str]:
        """The ticked paths in the list's order, which starts with the paths given (the first is the
        comparison's baseline)."""
        ticked = set(self.query_one("#paths", SelectionList).selected)
        return [p for p in self._order if p in ticked]

    def load(self, values: FormValues) -> None:
        """Fill the form (from a profile)."""
        self._initial = values
        for cid, _, _ in TYPED:
            self.query_one(f"#{cid}", Input).value = getattr(values, cid)
        self.query_one("#target-path", Input).value = values.typed_path
        self.query_one("#io", Select).value = values.io
        self.query_one("#buffered", Checkbox).value = values.buffered
        paths = self.query_one("#paths", SelectionList)
        paths.clear_options()
        paths.add_options(self._path_choices(values.paths))
        gpu_widget = self.query_one("#gpu")
        if (
            isinstance(gpu_widget, Select)
            and values.gpu is not None
            and any(values.gpu == idx for _, idx in self._gpus)
        ):
            gpu_widget.value = values.gpu

    # ---------------------------------------------------------------- errors
    def show_error(self, control: str, message: str) -> None:
        self.clear_errors()
        self.error = (control, message)
        self.query_one(f"#error-{control}", Static).update(Text(message))
        self.query_one(f"#error-{control}").set_class(True, "-shown")
        widget_id = "target-path" if control == "target" else control
        self.query_one(f"#{widget_id}").set_class(True, "-invalid-choice")

    def clear_errors(self) -> None:
        self.error = None
        for c in CONTROLS:
            err = self.query_one(f"#error-{c}", Static)
            if err.has_class("-shown"):
                err.update("")
                err.set_class(False, "-shown")
        for w in self.query(".-invalid-choice"):
            w.set_class(False, "-invalid-choice")
