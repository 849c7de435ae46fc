"""Results side by side in seed 001's shape, with the ratio to a chosen baseline.

At 80 columns the headers are short and columns whose value is the same in
every row (I/O pattern, queue depth) move into the caption, so the CPU columns
and the ratio stay on screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import DataTable

from xferscope.engines.base import RunResult
from xferscope.report import COMPARE_HEADERS, compare_rows

SHORT = {
    "block": "bs",
    "workers": "w",
    "avg lat (us)": "avg µs",
    "p99 lat (us)": "p99 µs",
    "usr CPU %": "usr%",
    "sys CPU %": "sys%",
}
FOLDABLE = ("io", "qd")  # shown in the caption when every row has the same value
WIDE = 120


@dataclass
class TableRow:
    """A row of the table: a result, or one host's part of a run over several hosts."""

    result: RunResult
    number: int  # the result's number (1-based), shared by its host rows
    host: str | None = None  # the host of a per-host row
    slowest: bool = False


def slowest_host(r: RunResult) -> str | None:
    """The host of a run over several hosts with the lowest throughput (as the run named it, when it did)."""
    if len(r.hosts) < 2:
        return None
    named = (r.environment.get("cluster") or {}).get("slowest_host")
    if named and any(h.environment.get("host") == named for h in r.hosts):
        return named
    return min(r.hosts, key=lambda h: h.throughput_mib_s).environment.get("host")


def table_rows(results: Sequence[RunResult]) -> list[TableRow]:
    """Each result, followed by one row per host when it ran on several."""
    rows = []
    for i, r in enumerate(results, start=1):
        rows.append(TableRow(r, i))
        slow = slowest_host(r)
        for h in r.hosts:
            host = h.environment.get("host") or "?"
            rows.append(TableRow(h, i, host, host == slow))
    return rows


def hosts_note(results: Sequence[RunResult]) -> str:
    """'2: 2 hosts (node-a, node-b), slowest node-b at 812.3 MiB/s, 41% below node-a' per multi-host run."""
    notes = []
    for i, r in enumerate(results, start=1):
        slow = slowest_host(r)
        if not slow:
            continue
        by = {h.environment.get("host"): h for h in r.hosts}
        fast = max(r.hosts, key=lambda h: h.throughput_mib_s)
        s_mib, f_mib = by[slow].throughput_mib_s, fast.throughput_mib_s
        behind = f", {100 * (1 - s_mib / f_mib):.0f}% below {fast.environment.get('host')}" if f_mib > 0 else ""
        notes.append(f"{i}: {len(r.hosts)} hosts, slowest {slow} at {s_mib:,.1f} MiB/s{behind}")
    return "; ".join(notes)


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
        """One row per result and per host of a run over several hosts; ``baseline`` is a row index."""
        width = self.app.size.width
        key = (tuple(id(r) for r in results), baseline, width >= WIDE)
        if key == self._shown:
            return
        self._shown = key
        row = self.cursor_row
        entries = table_rows(results)
        rows = compare_rows([e.result for e in entries], baseline) if entries else []
        keep, headers, self.caption = table_shape(rows, width)
        self.clear(columns=True)
        self.add_columns(*headers)
        for i, (e, cells) in enumerate(zip(entries, rows)):
            r = e.result
            style = "bold" if i == baseline else ""
            shown = [cells[k] for k in keep]
            status = "" if r.status == "ok" else f" ({r.status})"
            if e.host is None:
                hosts = f" (all {len(r.hosts)} hosts)" if r.hosts else ""
                shown[0] = f"{e.number} {shown[0]}{hosts}{status}"
            else:
                shown[0] = f"  ↳ {e.host}{status}" + (" ◀ slowest" if e.slowest else "")
                style = style or ("yellow" if e.slowest else "dim")
            shown[-1] += " *" if i == baseline else ""
            self.add_row(*(Text(c, style=style) for c in shown), key=str(i))
        if entries:
            self.move_cursor(row=min(row, len(entries) - 1))
