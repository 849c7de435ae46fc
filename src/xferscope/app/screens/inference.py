"""Inference: will this storage bring KV-cache back, or a model up, fast enough? A KV-cache restore
(`workload kvcache`) or a model load (`workload load`) by a path into GPU memory, live GB/s per GPU, then the
run's figures, and the session's runs ranked beside."""

from __future__ import annotations

from textual import on
from textual.widgets import DataTable, Input, Static

from xferscope.app.inference_model import (
    FIELD_CONTROL,
    InferenceFormValues,
    InferenceState,
    build_spec,
    describe,
    session_entries,
)
from xferscope.app.screens.workload_run import WorkloadRunScreen, run_bindings
from xferscope.app.widgets.title import title_text
from xferscope.workloads.common.libraries import LOAD_LIBRARIES, installed

#: xferscope's paths, and for a load the libraries installed here (a path typed that is not: one line under it)
PATH_HINT = "host, bounce, bounce-async, cufile" + "".join(f", {p}" for p in installed(LOAD_LIBRARIES))

#: (control id, label, placeholder, value attribute) of the typed fields, two rows
FIELDS = (
    ("inf-kind", "Kind", "kvcache, load", "kind"),
    ("inf-model", "Model", "llama3.1-8b, llama3.1-70b, deepseek-v3", "model"),
    ("inf-path", "Path", PATH_HINT, "path"),
    ("inf-prompt", "Prompt", "tokens: 8192, 1024-8192", "prompt"),
    ("inf-concurrency", "At once", "requests (kvcache), threads (load)", "concurrency"),
    ("inf-seconds", "Run s", "10", "seconds"),
    ("inf-files", "Files", "load: your shards (empty: generated)", "files"),
    ("inf-target", "Dir", "where data is generated (empty: temporary)", "target"),
)
GPU_HEADERS = ("gpu", "landed", "GB/s")
SESSION_HEADERS = ("#", "run", "time", "GB/s")


class InferenceScreen(WorkloadRunScreen):
    AUTO_FOCUS = ""
    BINDINGS = run_bindings("inference")

    leaving = "stopping the inference run and removing what it generated…"
    what = "inference run"
    summary_id = "inf-summary"
    fields = FIELDS
    form_class = InferenceFormValues
    error_id = "inf-error"
    field_control = FIELD_CONTROL
    build_spec = staticmethod(build_spec)
    state_class = InferenceState

    prefix = "inf"
    figures_panel = ("gpus", "Landed so far, per GPU (host: host memory)")
    session_title = "Runs ranked by time (= level)"

    table_headers = GPU_HEADERS
    session_headers = SESSION_HEADERS
    idle_text = (
        "kvcache: requests restore their prompts' KV chunks (LMCache's layout) by the path into GPU memory; load: a "
        "model's safetensors shards into GPU memory, cold. r starts, x stops, o opens a saved run"
    )

    def on_mount(self) -> None:
        self.mount_tables("inference")

    def summary_lines(self, result) -> list:
        from xferscope.workloads.inference.text import kv_lines, load_lines

        return kv_lines(result) if result.kind.startswith("workload-kvcache") else load_lines(result)

    # ----------------------------------------------------------- running
    def make_session(self, spec):
        from xferscope.workloads.inference.kvcache import KvSession
        from xferscope.workloads.inference.kvcache_spec import KvSpec
        from xferscope.workloads.inference.load import LoadSession

        return KvSession(spec) if isinstance(spec, KvSpec) else LoadSession(spec)

    def has_figures(self, result) -> bool:
        return bool(result.bytes_read)

    # ----------------------------------------------------------- saved ones
    def action_open(self) -> None:
        from xferscope.workloads.inference.kind import KVCACHE, LOAD

        self.open_saved_runs("Open a saved run (workload kvcache --json, workload load --json)", (KVCACHE, LOAD))

    # --------------------------------------------------------------- drawing
    def _kind(self) -> str:
        """The kind of the run in flight; between runs, the one the form asks for (what r would start)."""
        going = self.status in ("preparing", "running", "stopping") and self.state.spec is not None
        return self.state.kind if going else self.form_values().kind.strip()

    @on(Input.Changed, "#inf-kind")
    def kind_changed(self) -> None:
        """The title and the session's ranking follow the Kind field as it is typed."""
        self.draw_title()
        self._session()

    def _table(self) -> None:
        from xferscope.units import format_bytes

        table = self.query_one("#inf-table", DataTable)
        table.clear()
        for row in self.state.rows.values():
            table.add_row(
                "host" if row.gpu is None else str(row.gpu),
                format_bytes(row.bytes),
                "-" if row.gb_per_s is None else f"{row.gb_per_s:.2f}",
            )

    def _session(self) -> None:
        table = self.query_one("#inf-session", DataTable)
        table.clear()
        kind = self._kind()
        scale, unit = (1000, "ms") if kind == "kvcache" else (1, "s")
        for i, e in enumerate(session_entries(self.session_results, kind, self.saved), 1):
            time = "-" if e.value is None else f"{e.value * scale:.{1 if scale > 1 else 2}f} {unit}"
            table.add_row(
                str(i),
                e.label + (" =" if e.level_with else ""),
                time,
                "-" if e.gb_per_s is None else f"{e.gb_per_s:.2f}",
            )

    def draw_title(self) -> None:
        st = self.state
        kind = self._kind()
        last = st.spec is not None and kind == st.kind  # the run the figures are of is of the kind shown
        out = title_text(f"workload {kind}", self.status if last or st.spec is None else "idle")
        if last:
            out.append(f" · {describe(st.spec)}")
        if st.made is not None and self.status in ("preparing", "stopping"):
            done, total = st.made
            out.append(f" · making the data set {100 * done // max(total, 1)}%", style="dim")
        elif st.t > 0 and last:
            out.append(f" · {st.t:.1f} s · {st.jobs} done · {st.bytes / st.t / 1e9:.2f} GB/s")
        if self.status == "idle" or not (last or st.spec is None):
            out.append(" · press r to start", style="dim")
        self.query_one("#inf-title", Static).update(out)
