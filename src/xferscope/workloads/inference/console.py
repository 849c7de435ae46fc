"""The console's Inference view (``workloads.common.console_view``): will this storage bring KV-cache back, or a
model up, fast enough? A KV-cache restore (`workload kvcache`) or a model load (`workload load`) by a path into GPU
memory: its form (its Kind field picks the workload), the spec it makes, live GB/s per GPU, then the run's
figures, and the session's runs of the kind ranked beside."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xferscope.errors import SpecError
from xferscope.units import format_bytes
from xferscope.workloads.common.console_view import (
    PRESS_R,
    ConsoleView,
    FormField,
    Row,
    Title,
    making,
    path_hint,
    saved_runs,
)
from xferscope.workloads.common.libraries import LOAD_LIBRARIES
from xferscope.workloads.common.options import from_text
from xferscope.workloads.common.run_options import RunOptions
from xferscope.workloads.common.side_by_side import Entry, entries, session_runs
from xferscope.workloads.inference.kind import KVCACHE, LOAD
from xferscope.workloads.inference.kvcache import KvSession
from xferscope.workloads.inference.kvcache_spec import KvSpec
from xferscope.workloads.inference.load import LoadSession
from xferscope.workloads.inference.load_spec import LoadSpec
from xferscope.workloads.inference.options import (
    KvRequestOptions,
    KvShapeOptions,
    ModelFilesOptions,
    ReadShapeOptions,
    kv_spec,
    load_spec,
)
from xferscope.workloads.inference.text import kv_lines, load_lines
from xferscope.workloads.inference.transfer import TransferTick

KINDS = ("kvcache", "load")
PATH_HINT = path_hint(LOAD_LIBRARIES)
FIELDS = (
    FormField("inf-kind", "Kind", "kvcache, load", "kind"),
    FormField("inf-model", "Model", "llama3.1-8b, llama3.1-70b, deepseek-v3", "model"),
    FormField("inf-path", "Path", PATH_HINT, "path"),
    FormField("inf-prompt", "Prompt", "tokens: 8192, 1024-8192", "prompt"),
    FormField("inf-concurrency", "At once", "requests (kvcache), threads (load)", "concurrency"),
    FormField("inf-seconds", "Run s", "10", "seconds"),
    FormField("inf-files", "Files", "load: your shards (empty: generated)", "files"),
    FormField("inf-target", "Dir", "where data is generated (empty: temporary)", "target"),
)
#: SpecError field -> the form control that explains it
FIELD_CONTROL = {
    "kind": "inf-kind",
    "model": "inf-model",
    "path": "inf-path",
    "prompt-tokens": "inf-prompt",
    "concurrency": "inf-concurrency",
    "threads": "inf-concurrency",
    "files": "inf-files",
    "duration": "inf-seconds",
    "requests": "inf-seconds",
    "dir": "inf-target",
    "cache-chunks": "inf-target",
    "tp": "inf-model",
    "shard-size": "inf-model",
    "gpu": "inf-model",
}


@dataclass
class InferenceFormValues:
    """The form as typed. Path left empty: bounce-async where there is a GPU, else host."""

    kind: str = "kvcache"
    model: str = "llama3.1-8b"
    path: str = ""
    prompt: str = "8192"  # kvcache: tokens per prompt
    concurrency: str = "4"  # kvcache: requests at once; load: reader threads
    files: str = ""  # load: your shards (a pattern or a directory); empty: generated from the model
    seconds: str = "10"  # kvcache: seconds to run
    target: str = ""  # where a cache or shards are generated; empty: a temporary directory


def build_spec(values: InferenceFormValues, has_gpu: bool) -> KvSpec | LoadSpec:
    """The form's spec, validated; SpecError names the field. Its fields are `workload kvcache`'s or `workload
    load`'s options, read and checked as the commands read them (``workloads.inference.options``)."""
    kind = values.kind.strip()
    if kind not in KINDS:
        raise SpecError("kind", f"kvcache (KV-cache restores) or load (a model's shards), got {kind!r}")
    path = values.path.strip() or ("bounce-async" if has_gpu else "host")
    note = "" if has_gpu or values.path.strip() else "no GPU here: host path"
    run = RunOptions(path=path, directory=values.target.strip() or None, defaults_note=note)
    if kind == "kvcache":
        shape = from_text(KvShapeOptions, {"model": values.model})
        asked = {"prompt_tokens": values.prompt, "concurrency": values.concurrency, "duration": values.seconds}
        return kv_spec(shape, from_text(KvRequestOptions, asked), run)
    files = values.files.strip()
    shards = from_text(ModelFilesOptions, {"files": files, "model": "" if files else values.model})
    reads = from_text(ReadShapeOptions, {"threads": values.concurrency})
    return load_spec(shards, reads, run)


def describe(spec: KvSpec | LoadSpec) -> str:
    if isinstance(spec, KvSpec):
        return (
            f"kvcache {spec.model.name}, prompts of {spec.prompt.text} tokens x{spec.concurrency} through {spec.path}"
        )
    what = spec.files if spec.files else spec.model.name if spec.model else "?"
    threads = "" if spec.by_library else f", {spec.threads} threads"  # a library runs with its own
    return f"load {what}, {spec.cache}{threads} through {spec.path}"


@dataclass
class GpuRow:
    gpu: int | None
    bytes: int = 0
    gb_per_s: float | None = None


@dataclass
class InferenceState:
    """A run as it goes: the data set being made, then the ticks (the jobs done, by GPU), then the result."""

    spec: KvSpec | LoadSpec | None = None
    made: tuple[int, int] | None = None
    t: float = 0.0
    jobs: int = 0
    rows: dict[int | None, GpuRow] = field(default_factory=dict)
    result: Any = None

    def start(self, spec: KvSpec | LoadSpec) -> None:
        self.spec = spec

    @property
    def kind(self) -> str:
        return "kvcache" if isinstance(self.spec, KvSpec) else "load"

    def take(self, tick: TransferTick) -> None:
        """A tick of the transfer engine: the jobs done since the last, each with its GPU and bytes."""
        self.made = None
        self.t, self.jobs = tick.t, tick.jobs
        for done in tick.new:
            row = self.rows.setdefault(done.gpu, GpuRow(done.gpu))
            row.bytes += done.bytes
        for row in self.rows.values():
            row.gb_per_s = row.bytes / self.t / 1e9 if self.t > 0 else None

    def finish(self, result: Any) -> None:
        self.result = result
        self.rows = {g.gpu: GpuRow(g.gpu, g.bytes, g.gb_per_s) for g in result.per_gpu}

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.rows.values())


def figure_of(result: Any) -> float | None:
    """What ranks a run: its restore time (p50) or its load time; lower is better."""
    return result.restore_p50_s if result.kind.startswith("workload-kvcache") else result.load_s


def session_entries(results: list, kind: str, saved: list | None = None) -> list[Entry]:
    """The session's finished runs of ``kind`` and saved ones opened, ranked as `workload compare` ranks them."""
    return entries(session_runs(results, saved or [], lambda r: r.kind.startswith(f"workload-{kind}")), figure_of)


def _kind(state: InferenceState, status: str, form: InferenceFormValues) -> str:
    """The kind of the run in flight; between runs, the one the form asks for (what r would start)."""
    going = status in ("preparing", "running", "stopping") and state.spec is not None
    return state.kind if going else form.kind.strip()


def table_rows(state: InferenceState) -> list[Row]:
    return [
        ("host" if row.gpu is None else str(row.gpu), format_bytes(row.bytes), figure(row.gb_per_s))
        for row in state.rows.values()
    ]


def figure(x: float | None, scale: float = 1, unit: str = "") -> str:
    return "-" if x is None else f"{x * scale:.{1 if scale > 1 else 2}f}{unit}"


def session_rows(
    results: list, saved: list, state: InferenceState, status: str, form: InferenceFormValues
) -> list[Row]:
    """The runs of the kind shown (``_kind``), ranked by their time."""
    kind = _kind(state, status, form)
    scale, unit = (1000, " ms") if kind == "kvcache" else (1, " s")
    return [
        (str(i), e.label + (" =" if e.level_with else ""), figure(e.value, scale, unit), figure(e.gb_per_s))
        for i, e in enumerate(session_entries(results, kind, saved), 1)
    ]


def title(state: InferenceState, status: str, form: InferenceFormValues) -> Title:
    kind = _kind(state, status, form)
    last = state.spec is not None and kind == state.kind  # the run the figures are of is of the kind shown
    facts: list[tuple[str, str]] = []
    if last:
        facts.append((f" · {describe(state.spec)}", ""))  # type: ignore[arg-type]
    made = making(state, status)
    if made:
        facts += made
    elif state.t > 0 and last:
        facts.append((f" · {state.t:.1f} s · {state.jobs} done · {state.bytes / state.t / 1e9:.2f} GB/s", ""))
    if status == "idle" or not (last or state.spec is None):
        facts.append(PRESS_R)
    return Title(f"workload {kind}", status if last or state.spec is None else "idle", facts)


VIEW = ConsoleView(
    name="inference",
    key="i",
    label="Inference",
    what="inference run",
    leaving="stopping the inference run and removing what it generated…",
    prefix="inf",
    fields=FIELDS,
    form=InferenceFormValues,
    field_control=FIELD_CONTROL,
    build_spec=build_spec,
    state=InferenceState,
    session=lambda spec: KvSession(spec) if isinstance(spec, KvSpec) else LoadSession(spec),
    has_figures=lambda r: bool(r.bytes_read),
    summary=lambda r: kv_lines(r) if r.kind.startswith("workload-kvcache") else load_lines(r),
    saved=("Open a saved run (workload kvcache --json, workload load --json)", saved_runs(KVCACHE, LOAD)),
    figures_panel=("gpus", "Landed so far, per GPU (host: host memory)"),
    session_title="Runs ranked by time (= level)",
    table_headers=("gpu", "landed", "GB/s"),
    session_headers=("#", "run", "time", "GB/s"),
    idle_text=(
        "kvcache: requests restore their prompts' KV chunks (LMCache's layout) by the path into GPU memory; load: a "
        "model's safetensors shards into GPU memory, cold. r starts, x stops, o opens a saved run"
    ),
    table_rows=table_rows,
    session_rows=session_rows,
    title=title,
)
