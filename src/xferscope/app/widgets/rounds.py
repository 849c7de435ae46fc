"""A comparison in rounds as the console shows it: one row per path with its median over the rounds so far,
a bar with the min-max whisker, the paired ratio to the baseline with its range, and the verdict."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from xferscope.compare.rounds import RoundsComparison

BAR_WIDE, BAR_NARROW = 24, 12
WIDE = 120


def whisker_bar(median: float | None, low: float | None, high: float | None, top: float, width: int) -> Text:
    """``█`` up to the lowest round, ``▓`` from there to the median, ``─┤`` from the median to the highest
    round; all on one scale (``top``) so bars of several paths compare. A path that moved data shows at least one
    cell, however small it is on that scale."""
    out = Text(no_wrap=True)
    if median is None or top <= 0:
        return out.append(" " * width)
    pos = [min(width, max(0, round(v / top * width))) for v in (low, median, high)]
    lo, med, hi = pos
    med = max(med, 1 if median > 0 else 0)
    lo, hi = min(lo, med), max(hi, med)
    out.append("█" * lo, style="bold")
    out.append("▓" * (med - lo), style="bold")
    if hi > med:
        out.append("─" * (hi - med - 1) + "┤", style="dim")
    out.append(" " * (width - hi))
    return out


def rounds_cells(comp: RoundsComparison, baseline: int, wide: bool) -> tuple[list[str], list[list[Text | str]]]:
    """Headers and rows of the table: #, path, rounds done, median MiB/s, (min-max when wide), the bar,
    the ratio to ``baseline`` (median of the paired ratios, with their range), the verdict."""
    headers = (
        ["#", "path", "rounds", "MiB/s"]
        + (["min–max"] if wide else [])
        + ["median, ▓─┤ min–max", "ratio (range)", "verdict"]
    )
    spreads = [comp.spread(slot) for slot in range(comp.paths)]
    top = max((s["max"] for s in spreads if s["max"]), default=0.0)
    width = BAR_WIDE if wide else BAR_NARROW
    rows = []
    for slot, (label, st) in enumerate(zip(comp.labels, spreads)):
        planned = sum(1 for run in comp.runs if run.slot == slot)
        ran = sum(1 for run in comp.runs if run.slot == slot and run.result is not None)
        if slot == baseline:
            ratio, word = "1.00", "baseline"
        else:
            v = comp.verdict(slot, baseline)
            ratio, word = (v.spread(), v.text) if v else ("-", "-")
        cells: list[Text | str] = [str(slot + 1), label, f"{ran}/{planned}", f"{st['median']:,.1f}" if st["n"] else "-"]
        if wide:
            cells.append(f"{st['min']:,.1f}–{st['max']:,.1f}" if st["n"] else "-")
        cells += [whisker_bar(st["median"], st["min"], st["max"], top, width), ratio, word]
        rows.append(cells)
    return headers, rows


class RoundsTable(DataTable):
    DEFAULT_CSS = """
    RoundsTable { height: auto; max-height: 50%; }
    """

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._shown: tuple | None = None

    def show(self, comp: RoundsComparison, baseline: int) -> None:
        wide = self.app.size.width >= WIDE
        key = (id(comp), tuple(id(run.result) for run in comp.runs), baseline, wide)
        if key == self._shown:
            return
        self._shown = key
        row = self.cursor_row
        headers, rows = rounds_cells(comp, baseline, wide)
        texts = [
            [c if isinstance(c, Text) else Text(c, style="bold" if i == baseline else "") for c in cells]
            for i, cells in enumerate(rows)
        ]
        self.clear(columns=True)
        # each column as wide as its widest cell, set here: a figure is never cut, however the table was laid out
        for k, header in enumerate(headers):
            self.add_column(header, width=max([len(header)] + [row[k].cell_len for row in texts]))
        for i, cells in enumerate(texts):
            self.add_row(*cells, key=str(i))
        if rows:
            self.move_cursor(row=min(row, len(rows) - 1))
