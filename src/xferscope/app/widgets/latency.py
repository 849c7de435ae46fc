"""Latency percentiles of the last interval (of the whole run once it ended), and p50 / p99 / max over time."""

from __future__ import annotations

from xferscope.app import figures
from xferscope.app.braille import Curve
from xferscope.app.session import RunRecord
from xferscope.app.widgets.chart_panel import ChartPanel

#: (label, LatencySummary field, colour) drawn over time
CURVES = (("p50", "p50", "#87d787"), ("p99", "p99", "#ffd75f"), ("max", "max", "#ff5f5f"))
COLOR = {name: color for name, _, color in CURVES}


class LatencyPanel(ChartPanel):
    def __init__(self, **kwargs):
        super().__init__(figures.latency_unit, "Latency", **kwargs)
        self.add_class("-two-lines")

    def figures(self, record: RunRecord) -> str:
        if record.result is not None:  # the whole run, from its histogram
            lat = record.result.latency_us
            self.border_title = "Latency (whole run)"
        else:
            lat = record.latest.latency_us
            self.border_title = "Latency (last interval)"
        return (
            f"[{COLOR['p50']}]p50[/] {figures.latency(lat.p50)}  [{COLOR['p99']}]p99[/] "
            f"{figures.latency(lat.p99)}\np99.9 {figures.latency(lat.p999)}  "
            f"[{COLOR['max']}]max[/] {figures.latency(lat.max)}"
        )

    def curves(self, record: RunRecord) -> list[Curve]:
        return [
            Curve(name, [(x.t, getattr(x.latency_us, key)) for x in record.history], color)
            for name, key, color in CURVES
        ]
