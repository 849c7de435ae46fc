"""Latency percentiles of the last interval, and p50 / p99 / max over time."""
from __future__ import annotations

from textual.containers import Vertical

from xferscope.app import figures
from xferscope.app.braille import Series
from xferscope.app.session import RunRecord
from xferscope.app.widgets.figures_line import FiguresText
from xferscope.app.widgets.chart import LineChart, time_axis_end

#: (label, LatencySummary field, colour) drawn over time
CURVES = (("p50", "p50", "#87d787"), ("p99", "p99", "#ffd75f"), ("max", "max", "#ff5f5f"))
COLOR = {name: color for name, _, color in CURVES}


class LatencyPanel(Vertical):
    DEFAULT_CSS = """
    LatencyPanel > .figures { height: 2; }
    """

    def __init__(self, **kwargs):
        super().__init__(
            FiguresText(classes="figures", id="latency-now"),
            LineChart(figures.latency_unit, id="latency-chart"), **kwargs)
        self.border_title = "Latency"

    def show(self, record: RunRecord | None) -> None:
        now = self.query_one("#latency-now", FiguresText)
        chart = self.query_one(LineChart)
        s = record.latest if record else None
        if s is None:
            now.show("")
            chart.set_data([])
            return
        lat = s.latency_us
        if record.result is not None:  # the whole run, from its histogram
            lat = record.result.latency_us
            self.border_title = "Latency (whole run)"
        else:
            self.border_title = "Latency (last interval)"
        now.show(f"[{COLOR['p50']}]p50[/] {figures.latency(lat.p50)}  [{COLOR['p99']}]p99[/] "
                   f"{figures.latency(lat.p99)}\np99.9 {figures.latency(lat.p999)}  [{COLOR['max']}]max[/] "
                   f"{figures.latency(lat.max)}")
        series = [Series(name, [(x.t, getattr(x.latency_us, key)) for x in record.history], color)
                  for name, key, color in CURVES]
        chart.set_data(series, time_axis_end(record))
