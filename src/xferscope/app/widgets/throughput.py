"""Throughput now and over time, with IOPS and how far the run has got."""
from __future__ import annotations

from textual.containers import Vertical

from xferscope.app import figures
from xferscope.app.braille import Series
from xferscope.app.session import RunRecord
from xferscope.app.widgets.figures_line import FiguresText
from xferscope.app.widgets.chart import PALETTE, LineChart, time_axis_end
from xferscope.units import GIB


class ThroughputPanel(Vertical):
    DEFAULT_CSS = """
    ThroughputPanel > .figures { height: 1; }
    """

    def __init__(self, **kwargs):
        super().__init__(
            FiguresText(classes="figures", id="throughput-now"),
            LineChart(figures.rate_unit, id="throughput-chart"), **kwargs)
        self.border_title = "Throughput"

    def show(self, record: RunRecord | None) -> None:
        now = self.query_one("#throughput-now", FiguresText)
        chart = self.query_one(LineChart)
        s = record.latest if record else None
        if s is None:
            now.show("")
            chart.set_data([])
            return
        r = record.result
        if r is not None:
            now.show(f"avg [b]{figures.rate(r.throughput_gib_s * GIB)}[/b]  {figures.count(r.iops)} IOPS  "
                       f"{figures.size(r.bytes)} in {figures.seconds(r.seconds)}")
        else:
            when = f"{figures.seconds(s.t)}/{figures.seconds(record.spec.duration)}" if record.spec.duration \
                else figures.seconds(s.t)
            now.show(f"now [b]{figures.rate(s.throughput_gib_s * GIB)}[/b]  {figures.count(s.iops)} IOPS  "
                       f"{when}  {figures.size(s.total_bytes)}")
        points = [(x.t, x.throughput_gib_s * GIB) for x in record.history]
        chart.set_data([Series(record.spec.name, points, PALETTE[0])], time_axis_end(record))
