"""Workload: will this storage keep N GPUs busy? A training-input run (`workload train`) with a live bar of AU
per accelerator against the threshold, then the run's figures."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable, Static

from xferscope.app.screens.workload_run import WorkloadRunScreen, run_bindings
from xferscope.app.widgets.title import title_text
from xferscope.app.workload_model import (
    FIELD_CONTROL,
    WorkloadFormValues,
    WorkloadState,
    au_bar,
    build_spec,
    session_entries,
)
from xferscope.units import figure_text
from xferscope.workloads.common.libraries import TRAIN_LIBRARIES, installed

#: xferscope's paths, and a PyTorch DataLoader where torch is installed here
PATH_HINT = "host, bounce, bounce-async, cufile" + "".join(f", {p}" for p in installed(TRAIN_LIBRARIES))

#: (control id, label, placeholder, value attribute) of the typed fields, two rows
FIELDS = (
    ("wl-preset", "Preset", "unet3d, cosmoflow, resnet50", "preset"),
    ("wl-path", "Path", PATH_HINT, "path"),
    ("wl-compute", "Compute", "gpu, sleep", "compute"),
    ("wl-accelerators", "Acc", "1", "accelerators"),
    ("wl-type", "Type", "h100, a100", "accelerator_type"),
    ("wl-files", "Files", "400", "files"),
    ("wl-seconds", "Run s", "10", "seconds"),
    ("wl-target", "Dir", "where the data set goes (empty: temporary)", "target"),
)
#: per accelerator: the bar is AU against the threshold (|); waits in ms, the first batch in s
TABLE_HEADERS = ("acc", "gpu", "steps", "AU", "vs threshold", "smp/s", "MB/s", "wait50", "wait99", "1st s")
SESSION_HEADERS = ("#", "run", "AU", "pass")


class WorkloadScreen(WorkloadRunScreen):
    AUTO_FOCUS = ""
    BINDINGS = run_bindings("workload")

    leaving = "stopping the training run and removing its data set…"
    what = "training run"
    summary_id = "wl-summary"
    fields = FIELDS
    form_class = WorkloadFormValues
    error_id = "wl-error"
    field_control = FIELD_CONTROL
    build_spec = staticmethod(build_spec)
    state_class = WorkloadState

    prefix = "wl"
    figures_panel = ("accelerators", "Accelerator utilisation (AU), the first step left out, as DLIO")
    session_title = "Runs ranked by AU (= level)"

    #: narrower than this, the session's runs are left out (the accelerators' bars need the width)
    SESSION_MIN_WIDTH = 120

    def on_resize(self, event) -> None:
        super().on_resize(event)
        self._fit()

    def _fit(self) -> None:
        self.query_one("#wl-session-panel").display = self.app.size.width >= self.SESSION_MIN_WIDTH

    table_headers = TABLE_HEADERS
    session_headers = SESSION_HEADERS
    idle_text = (
        "each emulated accelerator reads its batches by the path into GPU memory (host: host memory, as DLIO) and "
        "computes on each for the preset's time; AU is the share of time spent computing"
    )

    def on_mount(self) -> None:
        self._fit()
        self.mount_tables("workload")

    def summary_lines(self, result) -> list:
        from xferscope.workloads.train.text import table_lines

        return table_lines(result, per_accelerator=False)

    # ----------------------------------------------------------- running
    def make_session(self, spec):
        from xferscope.workloads.train.train import TrainSession

        return TrainSession(spec)

    def has_figures(self, result) -> bool:
        return bool(result.accelerators) and any(a.steps for a in result.accelerators)

    # ----------------------------------------------------------- saved ones
    def action_open(self) -> None:
        from xferscope.workloads.train.train_compare import load_entries

        def show() -> None:
            self.query_one("#wl-session-panel").display = True

        self.open_saved("Open a saved training run (workload train --json) or DLIO's summary.json", load_entries, show)

    # --------------------------------------------------------------- drawing
    def _session(self) -> None:
        table = self.query_one("#wl-session", DataTable)
        table.clear()
        for i, e in enumerate(session_entries(self.session_results, self.saved), 1):
            passed = {True: "pass", False: "fail", None: "-"}[e.passed]
            table.add_row(
                str(i),
                e.label,
                "-" if e.value is None else f"{100 * e.value:.1f}%",
                Text(
                    passed + (" =" if e.level_with else ""),
                    style="green" if e.passed else "red" if e.passed is False else "",
                ),
            )

    def _table(self) -> None:
        table = self.query_one("#wl-table", DataTable)
        table.clear()
        spec = self.state.spec
        if spec is None:
            return
        for row in self.state.rows.values():
            gpu = spec.gpu_of(row.index)
            table.add_row(
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

    def draw_title(self) -> None:
        out = title_text("workload train", self.status)
        st, spec = self.state, self.state.spec
        if spec is not None:
            out.append(f" · {spec.preset} x{spec.accelerators} through {spec.path}, compute {spec.compute}")
        if st.made is not None and self.status in ("preparing", "stopping"):
            done, total = st.made
            out.append(f" · making the data set {100 * done // max(total, 1)}%", style="dim")
        elif st.t > 0:
            au = st.au
            out.append(f" · {st.t:.1f} s · AU {'-' if au is None else f'{100 * au:.1f}%'}")
            if st.mb_per_s is not None:
                out.append(f" · {st.mb_per_s:.0f} MB/s read")
        if self.status == "idle":
            out.append(" · press r to start", style="dim")
        self.query_one("#wl-title", Static).update(out)
