"""A panel of one run: a line or two of figures over a chart. Subclasses say what the figures and curves are."""

from __future__ import annotations

from textual.containers import Vertical

from xferscope.app.braille import Curve
from xferscope.app.session import RunRecord
from xferscope.app.widgets.chart import LineChart, UnitPicker, time_axis_end
from xferscope.app.widgets.figures_line import FiguresText


class ChartPanel(Vertical):
    DEFAULT_CSS = """
    ChartPanel > FiguresText { height: 1; }
    ChartPanel.-two-lines > FiguresText { height: 2; }
    """

    def __init__(self, unit_for: UnitPicker, title: str, **kwargs):
        super().__init__(FiguresText(), LineChart(unit_for), **kwargs)
        self.border_title = title

    def show(self, record: RunRecord | None) -> None:
        text, chart = self.query_one(FiguresText), self.query_one(LineChart)
        if record is None or record.latest is None:
            text.show("")
            chart.set_data([])
            return
        text.show(self.figures(record))
        chart.set_data(self.curves(record), time_axis_end(record))

    def figures(self, record: RunRecord) -> str:
        raise NotImplementedError

    def curves(self, record: RunRecord) -> list[Curve]:
        raise NotImplementedError
