"""Checkpoint: how long does this storage hold training up to save the model, and how long does a restart take to
read it back? A model's checkpoints (this host's share of 8 ranks, `workload checkpoint --subset`) written by a
path from where the states live, evicted and read back; live, the phase and each rank's bytes written; then the
run's figures, and the session's runs ranked beside."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from xferscope.app.checkpoint_model import (
    FIELD_CONTROL,
    CheckpointFormValues,
    CheckpointState,
    build_spec,
    describe,
    session_entries,
)
from xferscope.app.screens.workload_run import WorkloadRunScreen, run_bindings
from xferscope.app.widgets.title import title_text
from xferscope.workloads.common.libraries import CHECKPOINT_LIBRARIES, installed

#: xferscope's paths, and the checkpoint libraries installed here (a path typed that is not: one line under it)
PATH_HINT = "host, bounce, bounce-async, cufile" + "".join(f", {p}" for p in installed(CHECKPOINT_LIBRARIES))

#: (control id, label, placeholder, value attribute) of the typed fields, two rows
FIELDS = (
    ("ck-model", "Model", "llama3-8b, llama3-70b, llama3-405b, llama3-1t", "model"),
    ("ck-path", "Path", PATH_HINT, "path"),
    ("ck-scale", "Scale", "each file's share: 0.01", "scale"),
    ("ck-checkpoints", "Checkpoints", "written, then read: 4", "checkpoints"),
    ("ck-save", "Save", "sync, async", "save"),
    ("ck-target", "Dir", "where the checkpoints go (empty: temporary)", "target"),
)
RANK_HEADERS = ("rank", "gpu", "written", "save s", "restore s")
SESSION_HEADERS = ("#", "run", "save s", "restore s", "GB/s")


class CheckpointScreen(WorkloadRunScreen):
    AUTO_FOCUS = ""
    BINDINGS = run_bindings("checkpoint")

    leaving = "stopping the checkpoint run and removing its checkpoints…"
    what = "checkpoint run"
    summary_id = "ck-summary"
    fields = FIELDS
    form_class = CheckpointFormValues
    error_id = "ck-error"
    field_control = FIELD_CONTROL
    build_spec = staticmethod(build_spec)
    state_class = CheckpointState

    prefix = "ck"
    figures_panel = ("ranks", "Each rank: bytes written (live), then its mean save and restore")
    session_title = "Runs ranked by time until durable (= level)"

    table_headers = RANK_HEADERS
    session_headers = SESSION_HEADERS
    idle_text = (
        "this host's share of 8 ranks (MLPerf Storage's subset mode) written by the path, fsync per file, evicted, "
        "read back with a rank shift and every byte checked. r starts, x stops, o opens a saved run"
    )

    def on_mount(self) -> None:
        self.mount_tables("checkpoint")

    def summary_lines(self, result) -> list:
        from xferscope.workloads.checkpoint.text import run_lines

        return run_lines(result)

    # ----------------------------------------------------------- running
    def make_session(self, ask):
        from xferscope.workloads.checkpoint.session import CheckpointSession

        return CheckpointSession(ask.plan, ask.options)

    def has_figures(self, result) -> bool:
        return bool(result.saves)

    # ----------------------------------------------------------- saved ones
    def action_open(self) -> None:
        from xferscope.workloads.checkpoint.kind import CHECKPOINT

        self.open_saved_runs("Open a saved run (workload checkpoint --json)", (CHECKPOINT,))

    # --------------------------------------------------------------- drawing
    def _table(self) -> None:
        from xferscope.units import format_bytes

        table = self.query_one("#ck-table", DataTable)
        table.clear()
        for row in self.state.rows:
            table.add_row(
                str(row.rank),
                "host" if row.gpu is None else str(row.gpu),
                format_bytes(row.bytes),
                "-" if row.write_s is None else f"{row.write_s:.3f}",
                "-" if row.restore_s is None else f"{row.restore_s:.3f}",
            )

    def _session(self) -> None:
        table = self.query_one("#ck-session", DataTable)
        table.clear()
        for i, e in enumerate(session_entries(self.session_results, self.saved), 1):
            table.add_row(
                str(i),
                e.label + (" =" if e.level_with else ""),
                "-" if e.value is None else f"{e.value:.3f}",
                "-" if e.beside is None else f"{e.beside:.3f}",
                "-" if e.gb_per_s is None else f"{e.gb_per_s:.2f}",
            )

    def draw_title(self) -> None:
        st = self.state
        out = title_text("workload checkpoint", self.status)
        if st.spec is not None:
            out.append(f" · {describe(st.spec)}")
        if st.phase and self.status in ("running", "stopping"):
            out.append(f" · {st.phase} checkpoint {st.checkpoint} · {st.bytes / 1e9:.2f} GB written")
        if self.status == "idle":
            out.append(" · press r to start", style="dim")
        self.query_one("#ck-title", Static).update(out)
