"""Throughput now (the last second) and over time, with IOPS and how far the run has got."""

from __future__ import annotations

from xferscope.app import figures
from xferscope.app.braille import Curve
from xferscope.app.session import RunRecord, window_rate
from xferscope.app.widgets.chart import PALETTE
from xferscope.app.widgets.chart_panel import ChartPanel
from xferscope.units import GIB


class ThroughputPanel(ChartPanel):
    def __init__(self, **kwargs):
        super().__init__(figures.rate_unit, "Throughput", **kwargs)

    def figures(self, record: RunRecord) -> str:
        r, s = record.result, record.latest
        if r is not None:  # the whole run
            return (
                f"avg [b]{figures.rate(r.throughput_gib_s * GIB)}[/b]  {figures.count(r.iops)} IOPS  "
                f"{figures.seconds(r.seconds)}  {figures.size(r.bytes)}"
            )
        when = figures.seconds(s.t)
        if record.spec.duration:
            when += f"/{figures.seconds(record.spec.duration)}"
        recent = record.recent()
        return (
            f"now [b]{figures.rate(window_rate(recent, 'bytes'))}[/b]  "
            f"{figures.count(window_rate(recent, 'ops'))} IOPS  {when}  {figures.size(s.total_bytes)}"
        )

    def curves(self, record: RunRecord) -> list[Curve]:
        return [Curve(record.spec.name, [(x.t, x.throughput_gib_s * GIB) for x in record.history], PALETTE[0])]
