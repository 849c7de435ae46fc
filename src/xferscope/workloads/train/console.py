"""The console's Workload view of a training run (``workloads.common.console_view``): will this storage keep N GPUs
busy? Its form, the spec it makes, the run's ticks and result as they arrive (a bar of AU per accelerator against
the threshold), the session's runs ranked beside."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xferscope.units import figure_text
from xferscope.workloads.common.console_view import PRESS_R, Cell, ConsoleView, FormField, Row, Title, making, path_hint
from xferscope.workloads.common.libraries import TRAIN_LIBRARIES
from xferscope.workloads.common.options import from_text
from xferscope.workloads.train.accelerators import TrainTick
from xferscope.workloads.train.options import AcceleratorOptions, TrainShapeOptions
from xferscope.workloads.train.text import table_lines
from xferscope.workloads.train.train import TrainSession
from xferscope.workloads.train.train_compare import entry_of_runs, load_entries, rank
from xferscope.workloads.train.train_record import TrainResult
from xferscope.workloads.train.train_spec import TrainSpec, train_spec

PATH_HINT = path_hint(TRAIN_LIBRARIES)
FIELDS = (
    FormField("wl-preset", "Preset", "unet3d, cosmoflow, resnet50", "preset"),
    FormField("wl-path", "Path", PATH_HINT, "path"),
    FormField("wl-compute", "Compute", "gpu, sleep", "compute"),
    FormField("wl-accelerators", "Acc", "1", "accelerators"),
    FormField("wl-type", "Type", "h100, a100", "accelerator_type"),
    FormField("wl-files", "Files", "400", "files"),
    FormField("wl-seconds", "Run s", "10", "seconds"),
    FormField("wl-target", "Dir", "where the data set goes (empty: temporary)", "target"),
)

#: SpecError field -> the form control that explains it
FIELD_CONTROL = {
    "preset": "wl-preset",
    "path": "wl-path",
    "compute": "wl-compute",
    "accelerators": "wl-accelerators",
    "accelerator-type": "wl-type",
    "files": "wl-files",
    "duration": "wl-seconds",
    "dir": "wl-target",
    "prefetch": "wl-accelerators",
}


@dataclass
class WorkloadFormValues:
    """The form as typed. Path and compute left empty: into the GPU where there is one, else as DLIO."""

    preset: str = "cosmoflow"
    path: str = ""
    compute: str = ""
    accelerators: str = "1"
    accelerator_type: str = "h100"
    files: str = "400"
    seconds: str = "10"
    target: str = ""  # where the set is generated; empty: a temporary directory


def build_spec(values: WorkloadFormValues, has_gpu: bool) -> TrainSpec:
    """The form's spec, validated; SpecError names the field. Its fields are `workload train`'s options, read and
    checked as the command reads them (``workloads.train.options``); one left empty is the command's default."""
    path = values.path.strip() or ("bounce-async" if has_gpu else "host")
    compute = values.compute.strip() or ("gpu" if has_gpu else "sleep")
    note = "" if has_gpu or (values.path.strip() and values.compute.strip()) else "no GPU here: host path, host sleep"
    asked = {"accelerator_type": values.accelerator_type, "accelerators": values.accelerators}
    emulated = from_text(AcceleratorOptions, asked)
    shape = from_text(
        TrainShapeOptions, {"files": values.files, "duration": values.seconds, "directory": values.target}
    )
    return train_spec(
        values.preset.strip(),
        emulated.accelerator_type,
        accelerators=emulated.accelerators,
        path=path,
        compute=compute,
        **shape.spec_fields(),
        defaults_note=note,
    )


def session_entries(results: list[TrainResult], saved: list | None = None):
    """The session's finished training runs, and saved ones opened (``saved``: entries of `workload compare`),
    side by side, ranked as `workload compare` ranks them."""
    entries = []
    for i, r in enumerate(results, 1):
        s = r.spec
        entries.append(entry_of_runs(f"{i} x{s.accelerators} {s.path} {s.compute}", [r]))
    return rank(entries + list(saved or []))


def au_bar(au: float | None, threshold: float, width: int = 24) -> Cell:
    """AU as a bar of ``width`` cells, green at or above the threshold, red below, the threshold marked ``|``."""
    if au is None or math.isnan(au):
        return (("·" * width, "dim"),)
    filled = round(max(0.0, min(1.0, au)) * width)
    mark = min(width - 1, round(threshold * width))
    style = "green" if au >= threshold else "red"
    return tuple(("|", "bold") if i == mark else ("█", style) if i < filled else ("·", "dim") for i in range(width))


@dataclass
class AcceleratorRow:
    index: int
    steps: int = 0
    au: float | None = None
    samples_per_s: float | None = None
    mb_per_s: float | None = None
    wait_p50_s: float | None = None
    wait_p99_s: float | None = None
    first_batch_s: float | None = None


def _known(x: float | None) -> float | None:
    return None if x is None or x != x else x


@dataclass
class WorkloadState:
    """A run as it goes: the set being made, then the ticks, then the result."""

    spec: TrainSpec | None = None
    made: tuple[int, int] | None = None  # (bytes written, of) while the set is made
    rows: dict[int, AcceleratorRow] = field(default_factory=dict)
    steps: dict[int, list] = field(default_factory=dict)  # each accelerator's steps so far (the ticks bring them)
    ticks: int = 0
    t: float = 0.0
    bytes_read: int = 0
    result: TrainResult | None = None

    def start(self, spec: TrainSpec) -> None:
        self.spec = spec
        self.rows = {i: AcceleratorRow(i) for i in range(spec.accelerators)}

    def take(self, tick: TrainTick) -> None:
        self.made = None
        self.t, self.bytes_read = tick.t, tick.bytes_read
        from xferscope.workloads.common.au import utilisation

        self.ticks += 1
        # the percentiles go over every step: on a long run of short steps, recomputed every few ticks only
        every = 1 + sum(len(s) for s in self.steps.values()) // 50_000
        for r in tick.accelerators:
            steps = self.steps.setdefault(r.index, [])
            steps.extend(r.new_steps)
            old = self.rows.get(r.index)
            if old is not None and self.ticks % every:
                old.steps, old.au = r.steps, _known(r.au)
                continue
            u = utilisation(steps)
            self.rows[r.index] = AcceleratorRow(
                r.index,
                r.steps,
                _known(r.au),
                _known(u.samples_per_s),
                _known(u.bytes_per_s / 1e6),
                _known(u.io_wait_p50_s),
                _known(u.io_wait_p99_s),
                _known(u.first_batch_s),
            )

    def finish(self, result: TrainResult) -> None:
        self.result = result
        for a in result.accelerators:
            self.rows[a.index] = AcceleratorRow(
                a.index, a.steps, a.au, a.samples_per_s, a.mb_per_s, a.io_wait_p50_s, a.io_wait_p99_s, a.first_batch_s
            )

    @property
    def au(self) -> float | None:
        if self.result is not None:
            return self.result.au
        aus = [r.au for r in self.rows.values()]
        return None if not aus or any(a is None for a in aus) else sum(a for a in aus if a is not None) / len(aus)

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes_read / self.t / 1e6 if self.t > 0 else None


def table_rows(state: WorkloadState) -> list[Row]:
    """A row an accelerator: the bar is AU against the threshold (|); waits in ms, the first batch in s."""
    spec = state.spec
    if spec is None:
        return []
    rows: list[Row] = []
    for row in state.rows.values():
        gpu = spec.gpu_of(row.index)
        rows.append(
            (
                str(row.index),
                "-" if gpu is None else str(gpu),
                str(row.steps),
                "-" if row.au is None else f"{100 * row.au:.1f}%",
                au_bar(row.au, spec.au_threshold, width=12),
                figure_text(row.samples_per_s, "{:.1f}"),
                figure_text(row.mb_per_s, "{:.0f}"),
                *(figure_text(None if w is None else 1000 * w, "{:.1f}") for w in (row.wait_p50_s, row.wait_p99_s)),
                figure_text(row.first_batch_s, "{:.2f}"),
            )
        )
    return rows


def session_rows(results: list[TrainResult], saved: list, *_: object) -> list[Row]:
    rows: list[Row] = []
    for i, e in enumerate(session_entries(results, saved), 1):
        passed = {True: "pass", False: "fail", None: "-"}[e.passed]
        style = "green" if e.passed else "red" if e.passed is False else ""
        rows.append(
            (
                str(i),
                e.label,
                figure_text(None if e.value is None else 100 * e.value, "{:.1f}%"),
                ((passed + (" =" if e.level_with else ""), style),),
            )
        )
    return rows


def title(state: WorkloadState, status: str, _form: object) -> Title:
    facts: list[tuple[str, str]] = []
    spec = state.spec
    if spec is not None:
        facts.append((f" · {spec.preset} x{spec.accelerators} through {spec.path}, compute {spec.compute}", ""))
    made = making(state, status)
    if made:
        facts += made
    elif state.t > 0:
        au = state.au
        facts.append((f" · {state.t:.1f} s · AU {'-' if au is None else f'{100 * au:.1f}%'}", ""))
        if state.mb_per_s is not None:
            facts.append((f" · {state.mb_per_s:.0f} MB/s read", ""))
    if status == "idle":
        facts.append(PRESS_R)
    return Title("workload train", status, facts)


VIEW = ConsoleView(
    name="workload",
    key="w",
    label="Workload",
    what="training run",
    leaving="stopping the training run and removing its data set…",
    prefix="wl",
    fields=FIELDS,
    form=WorkloadFormValues,
    field_control=FIELD_CONTROL,
    build_spec=build_spec,
    state=WorkloadState,
    session=TrainSession,
    has_figures=lambda r: bool(r.accelerators) and any(a.steps for a in r.accelerators),
    summary=lambda r: table_lines(r, per_accelerator=False),
    saved=("Open a saved training run (workload train --json) or DLIO's summary.json", load_entries),
    figures_panel=("accelerators", "Accelerator utilisation (AU), the first step left out, as DLIO"),
    session_title="Runs ranked by AU (= level)",
    table_headers=("acc", "gpu", "steps", "AU", "vs threshold", "smp/s", "MB/s", "wait50", "wait99", "1st s"),
    session_headers=("#", "run", "AU", "pass"),
    idle_text=(
        "each emulated accelerator reads its batches by the path into GPU memory (host: host memory, as DLIO) and "
        "computes on each for the preset's time; AU is the share of time spent computing"
    ),
    table_rows=table_rows,
    session_rows=session_rows,
    title=title,
    session_min_width=120,  # the accelerators' bars need the width
)
