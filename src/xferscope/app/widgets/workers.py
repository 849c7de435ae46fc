"""Per-worker progress, and elbencho's first-done / last-done figures when the run ends."""

from __future__ import annotations

import time

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import DataTable

from xferscope.app import figures
from xferscope.app.session import RunRecord
from xferscope.app.widgets.figures_line import FiguresText
from xferscope.units import MIB

REDRAW_S = 1.0
COLUMNS = ("worker", "MiB/s", "data", "done")
GPU_COLUMNS = COLUMNS + ("GPU",)


def worker_rows(record: RunRecord) -> list[tuple[str, ...]]:
    """One row a worker: the run's result when it has one, else the latest sample's counters."""
    gpu = record.spec.uses_gpu
    r = record.result
    if r is not None and r.workers:
        return [
            (str(w.worker), f"{w.throughput_mib_s:,.1f}", figures.size(w.bytes), f"{w.seconds:.2f} s")
            + ((figures.DASH if w.gpu is None else str(w.gpu),) if gpu else ())
            for w in r.workers
        ]
    s = record.latest
    if s is None:
        return []
    t = max(s.t, 1e-9)
    return [
        (str(i), f"{b / MIB / t:,.1f}", figures.size(b), figures.DASH) + ((figures.DASH,) if gpu else ())
        for i, b in enumerate(s.worker_bytes)
    ]


def done_text(record: RunRecord) -> str:
    r = record.result
    if r is None:
        s = record.latest
        done = s.workers_done if s else 0
        return f"{done} of {record.spec.workers} workers finished"
    if not r.first_done or not r.last_done:
        return "stopped before any worker finished" if r.status == "interrupted" else ""
    f, last = r.first_done, r.last_done
    return (
        f"first done {f.seconds:.2f} s, {f.throughput_mib_s:,.1f} MiB/s\n"
        f"last done  {last.seconds:.2f} s, {last.throughput_mib_s:,.1f} MiB/s"
    )


class WorkersPanel(Vertical):
    DEFAULT_CSS = """
    WorkersPanel > DataTable { height: 1fr; scrollbar-size-horizontal: 0; }
    WorkersPanel > #workers-done { height: 2; }
    """

    def __init__(self, **kwargs):
        super().__init__(
            DataTable(cursor_type="none", zebra_stripes=True, id="workers-table"),
            FiguresText(id="workers-done"),
            **kwargs,
        )
        self.border_title = "Workers"
        self._rows: list[tuple[str, ...]] = []
        self._columns: tuple[str, ...] = ()
        self._drawn_at = 0.0

    def show(self, record: RunRecord | None) -> None:
        table = self.query_one(DataTable)
        columns = (GPU_COLUMNS if record.spec.uses_gpu else COLUMNS) if record else COLUMNS
        if columns != self._columns:
            table.clear(columns=True)
            table.add_columns(*columns)
            self._columns, self._rows = columns, []
        now = time.monotonic()
        if record is not None and record.result is None and self._rows and now - self._drawn_at < REDRAW_S:
            return  # a run's per-worker averages move slowly: once a second is enough
        self._drawn_at = now
        rows = worker_rows(record) if record else []
        if len(self._rows) != len(rows):
            table.clear()
            for i, row in enumerate(rows):
                table.add_row(*row, key=str(i))
        else:
            for i, (old, row) in enumerate(zip(self._rows, rows)):
                for col, before, value in zip(table.ordered_columns, old, row):
                    if before != value:
                        table.update_cell(str(i), col.key, value, update_width=True)
        self._rows = rows
        self.query_one("#workers-done", FiguresText).show(Text(done_text(record) if record else ""))
