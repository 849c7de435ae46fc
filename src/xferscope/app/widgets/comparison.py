"""Results side by side in seed 001's shape, with the ratio to a chosen baseline.

At 80 columns the headers are short and columns whose value is the same in
every row (I/O pattern, queue depth) move into the caption, so the CPU columns
and the ratio stay on screen.
"""
from __future__ import annotations

from typing import Sequence

from rich.text import Text
from textual.widgets import DataTable

from xferscope.engines.base import RunResult
from xferscope.report import COMPARE_HEADERS, compare_rows

SHORT = {"block": "bs", "workers": "w", "avg lat (us)": "avg µs", "p99 lat (us)": "p99 µs", "usr CPU %": "usr%",
         "sys CPU %": "sys%"}
FOLDABLE = ("io", "qd")  # shown in the caption when every row has the same value
WIDE = 120


def table_shape(rows: list[tuple[str, ...]], width: int) -> tuple[list[int], list[str], str]:
    """(column indices shown, their headers, caption of the folded columns) for a table ``width`` wide."""
    compact = width < WIDE
    keep, headers, folded = [], [], []
    for i, h in enumerate(COMPARE_HEADERS):
        values = {row[i] for row in rows}
        if compact and h in FOLDABLE and len(values) == 1 and rows:
            folded.append(f"{h} {next(iter(values))}" if h == "qd" else next(iter(values)))
            continue
        keep.append(i)
        headers.append(SHORT.get(h, h) if compact else h)
    return keep, headers, ", ".join(folded)


class ComparisonTable(DataTable):
    DEFAULT_CSS = """
    ComparisonTable { height: auto; max-height: 50%; }
    """

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._shown: tuple | None = None
        #: what every row shares (folded out of the table at narrow widths)
        self.caption = ""

    def show(self, results: Sequence[RunResult], baseline: int) -> None:
        width = self.app.size.width
        key = (tuple(id(r) for r in results), baseline, width >= WIDE)
        if key == self._shown:
            return
        self._shown = key
        row = self.cursor_row
        rows = compare_rows(results, baseline) if results else []
        keep, headers, self.caption = table_shape(rows, width)
        self.clear(columns=True)
        self.add_columns(*headers)
        for i, (r, cells) in enumerate(zip(results, rows)):
            style = "bold" if i == baseline else ""
            shown = [cells[k] for k in keep]
            shown[0] = f"{i + 1} {shown[0]}" + ("" if r.status == "ok" else f" ({r.status})")
            shown[-1] += " *" if i == baseline else ""
            self.add_row(*(Text(c, style=style) for c in shown), key=str(i))
        if results:
            self.move_cursor(row=min(row, len(results) - 1))
