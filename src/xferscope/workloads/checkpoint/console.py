"""The console's Checkpoint view (``workloads.common.console_view``): how long does this storage hold training up to
save the model, and how long does a restart take to read it back? A model's checkpoints (this host's share of 8
ranks, `workload checkpoint --subset`) written by a path from where the states live, evicted and read back: its
form, the run it asks for, live the phase and each rank's bytes written, then the run's figures, and the session's
runs ranked beside."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from xferscope.errors import SpecError
from xferscope.units import format_bytes
from xferscope.workloads.checkpoint.checkpoint_process import CheckpointTick
from xferscope.workloads.checkpoint.kind import CHECKPOINT
from xferscope.workloads.checkpoint.options import CheckpointSizeOptions, ModelShapeOptions, checkpoint_spec
from xferscope.workloads.checkpoint.plan import CheckpointPlan
from xferscope.workloads.checkpoint.session import CheckpointRecord, CheckpointRunOptions, CheckpointSession
from xferscope.workloads.checkpoint.text import run_lines
from xferscope.workloads.common.console_view import PRESS_R, ConsoleView, FormField, Row, Title, path_hint, saved_runs
from xferscope.workloads.common.libraries import CHECKPOINT_LIBRARIES
from xferscope.workloads.common.options import from_text
from xferscope.workloads.common.side_by_side import Entry, entries, session_runs

#: SpecError field -> the form control that explains it
FIELD_CONTROL = {
    "model": "ck-model",
    "ranks": "ck-model",
    "path": "ck-path",
    "state": "ck-path",
    "scale": "ck-scale",
    "checkpoints": "ck-checkpoints",
    "save": "ck-save",
    "async": "ck-save",
    "dir": "ck-target",
    "gpu": "ck-model",
}
SAVES = ("sync", "async")
PATH_HINT = path_hint(CHECKPOINT_LIBRARIES)
FIELDS = (
    FormField("ck-model", "Model", "llama3-8b, llama3-70b, llama3-405b, llama3-1t", "model"),
    FormField("ck-path", "Path", PATH_HINT, "path"),
    FormField("ck-scale", "Scale", "each file's share: 0.01", "scale"),
    FormField("ck-checkpoints", "Checkpoints", "written, then read: 4", "checkpoints"),
    FormField("ck-save", "Save", "sync, async", "save"),
    FormField("ck-target", "Dir", "where the checkpoints go (empty: temporary)", "target"),
)


@dataclass
class CheckpointFormValues:
    """The form as typed. Path left empty: bounce-async where there is a GPU, else host."""

    model: str = "llama3-8b"
    path: str = ""
    scale: str = "0.01"  # each file's share: llama3-8b's 8 ranks write 1.05 GiB a checkpoint
    checkpoints: str = "4"
    save: str = "sync"  # or async: the GPUs blocked only for the copy to pinned memory
    target: str = ""  # where the checkpoints go; empty: a temporary directory


@dataclass(frozen=True)
class CheckpointAsk:
    """What the form asks for: the plan (checked against this machine) and the run's options."""

    plan: CheckpointPlan
    options: CheckpointRunOptions

    @property
    def path(self) -> str:
        return self.plan.spec.path


def build_spec(values: CheckpointFormValues, has_gpu: bool) -> CheckpointAsk:
    """The form's run, planned (SpecError names the field; what this machine cannot hold too). Its fields are
    `workload checkpoint`'s options, read and checked as the command reads them (``workloads.checkpoint.options``),
    this host writing the share of 8 ranks (``--subset``)."""
    save = values.save.strip()
    if save not in SAVES:
        raise SpecError("save", f"sync, or async (the GPUs blocked only for the copy), got {save!r}")
    size = from_text(CheckpointSizeOptions, {"scale": values.scale, "checkpoints": values.checkpoints})
    size = dataclasses.replace(size, subset=True, pinned=save == "async")
    spec = checkpoint_spec(
        values.model.strip(),
        size,
        ModelShapeOptions(),
        directory=values.target.strip() or None,
        path=values.path.strip() or ("bounce-async" if has_gpu else "host"),
    )
    plan = spec.plan(place=False)  # where the states live is measured when the run starts, not as it is typed
    if plan.refusals:
        raise plan.refusals[0]
    return CheckpointAsk(plan, CheckpointRunOptions(verify=True, rank_shift=1))


def describe(ask: CheckpointAsk) -> str:
    s = ask.plan.spec
    scaled = f" (scaled {s.scale:g})" if s.scale < 1 else ""
    mode = ", --async" if s.pinned_copies else ""
    return (
        f"{s.model.model.name} x{len(ask.plan.ranks)} ranks, {s.checkpoints} of {format_bytes(ask.plan.here_bytes)}"
        f"{scaled} through {s.path}{mode}"
    )


@dataclass
class CheckpointRankRow:
    rank: int
    gpu: int | None = None
    bytes: int = 0  # written so far (all its checkpoints)
    write_s: float | None = None
    restore_s: float | None = None


@dataclass
class CheckpointState:
    """A run as it goes: its phase and checkpoint, each rank's bytes written, then the record."""

    spec: CheckpointAsk | None = None
    made: tuple[int, int] | None = None
    phase: str = ""
    checkpoint: int = 0
    bytes: int = 0
    rows: list[CheckpointRankRow] = field(default_factory=list)
    result: Any = None

    def start(self, ask: CheckpointAsk) -> None:
        self.spec = ask
        self.rows = [CheckpointRankRow(r.rank) for r in ask.plan.ranks]

    def take(self, tick: CheckpointTick) -> None:
        self.phase, self.checkpoint, self.bytes = tick.phase, tick.checkpoint, tick.bytes_done
        for row, written in zip(self.rows, tick.per_rank):
            row.bytes = written

    def finish(self, result: CheckpointRecord) -> None:
        self.result = result
        self.phase = ""
        done = len(result.saves)
        self.rows = [
            CheckpointRankRow(
                f.rank, f.gpu, f.bytes * done, f.durable_seconds or f.write_seconds + f.fsync_seconds, f.restore_seconds
            )
            for f in result.ranks
        ]


def session_entries(results: list, saved: list | None = None) -> list[Entry]:
    """The session's finished runs and saved ones opened, ranked as `workload compare` ranks them: by the time
    until a save is durable."""
    return entries(session_runs(results, saved or []), lambda r: r.save_seconds, beside=lambda r: r.restore_seconds)


def _seconds(x: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def table_rows(state: CheckpointState) -> list[Row]:
    return [
        (
            str(row.rank),
            "host" if row.gpu is None else str(row.gpu),
            format_bytes(row.bytes),
            _seconds(row.write_s),
            _seconds(row.restore_s),
        )
        for row in state.rows
    ]


def session_rows(results: list, saved: list, *_: object) -> list[Row]:
    return [
        (
            str(i),
            e.label + (" =" if e.level_with else ""),
            _seconds(e.value),
            _seconds(e.beside),
            _seconds(e.gb_per_s, "{:.2f}"),
        )
        for i, e in enumerate(session_entries(results, saved), 1)
    ]


def title(state: CheckpointState, status: str, _form: object) -> Title:
    facts: list[tuple[str, str]] = []
    if state.spec is not None:
        facts.append((f" · {describe(state.spec)}", ""))
    if state.phase and status in ("running", "stopping"):
        facts.append((f" · {state.phase} checkpoint {state.checkpoint} · {state.bytes / 1e9:.2f} GB written", ""))
    if status == "idle":
        facts.append(PRESS_R)
    return Title("workload checkpoint", status, facts)


VIEW = ConsoleView(
    name="checkpoint",
    key="k",
    label="Checkpoint",
    what="checkpoint run",
    leaving="stopping the checkpoint run and removing its checkpoints…",
    prefix="ck",
    fields=FIELDS,
    form=CheckpointFormValues,
    field_control=FIELD_CONTROL,
    build_spec=build_spec,
    state=CheckpointState,
    session=lambda ask: CheckpointSession(ask.plan, ask.options),
    has_figures=lambda r: bool(r.saves),
    summary=run_lines,
    saved=("Open a saved run (workload checkpoint --json)", saved_runs(CHECKPOINT)),
    figures_panel=("ranks", "Each rank: bytes written (live), then its mean save and restore"),
    session_title="Runs ranked by time until durable (= level)",
    table_headers=("rank", "gpu", "written", "save s", "restore s"),
    session_headers=("#", "run", "save s", "restore s", "GB/s"),
    idle_text=(
        "this host's share of 8 ranks (MLPerf Storage's subset mode) written by the path, fsync per file, evicted, "
        "read back with a rank shift and every byte checked. r starts, x stops, o opens a saved run"
    ),
    table_rows=table_rows,
    session_rows=session_rows,
    title=title,
)
