"""CPU use: the engine's process, its workers, the whole system, the console's own process, and every core."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical

from xferscope.app import figures
from xferscope.app.braille import Curve, bar, level
from xferscope.app.session import WINDOW_S, CpuLog, RunRecord, window_average
from xferscope.app.widgets.chart import LineChart, time_axis_end
from xferscope.app.widgets.figures_line import FiguresText

#: (label, Sample fields usr/sys, colour) drawn over time: usr + sys of the process and of the workers
CURVES = (
    ("process", ("cpu_usr_pct", "cpu_sys_pct"), "#ffd75f"),
    ("engine", ("engine_usr_pct", "engine_sys_pct"), "#5fd7ff"),
)


MAX_BAR_LINES = 12  # more cores than this: one cell each


def _load_style(pct: float) -> str:
    return "green" if pct < 50 else "yellow" if pct < 85 else "red"


def _pct_of_one_core(max_pct: float) -> tuple[str, float]:
    return "%", 1.0


def core_lines(cores: tuple[float, ...] | list[float], width: int, height: int) -> Text:
    """One bar a core when they fit in ``height`` lines, else one cell a core (its height is the load),
    wrapped to ``width``."""
    out = Text(no_wrap=True, overflow="crop")
    if not cores or width < 8:
        return out
    if len(cores) <= height:
        label_w = len(f"cpu{len(cores) - 1}")
        bar_w = max(width - label_w - 7, 3)
        for i, pct in enumerate(cores):
            out.append(f"cpu{i}".ljust(label_w) + " ", style="dim")
            out.append(bar(pct / 100, bar_w), style=_load_style(pct))
            out.append(f" {pct:4.0f}%\n")
        return out
    per_row = max(width - 1, 1)
    for start in range(0, len(cores), per_row):
        for pct in cores[start : start + per_row]:
            out.append(level(pct / 100), style=_load_style(pct))
        out.append("\n")
    out.append(f"{len(cores)} cores, one cell each; full cell = 100%", style="dim")
    return out


def cpu_figures(record: RunRecord) -> tuple[str, dict[str, tuple[float, float]], tuple[float, ...]]:
    """(title, {line: (usr %, sys %)}, per-core busy %): the whole run once it ended, else the last second."""
    r = record.result
    if r is not None and r.cpu:
        cpu = r.cpu
        lines = {
            "process": (cpu.get("usr_pct"), cpu.get("sys_pct")),
            "engine": (cpu.get("engine_usr_pct"), cpu.get("engine_sys_pct")),
            "system": (cpu.get("sys_usr_pct"), cpu.get("sys_sys_pct")),
        }
        return "CPU (whole run)", lines, tuple(cpu.get("per_core_pct") or ())
    recent = record.recent()
    lines = {
        name: (window_average(recent, usr), window_average(recent, sys_))
        for name, (usr, sys_) in (
            ("process", ("cpu_usr_pct", "cpu_sys_pct")),
            ("engine", ("engine_usr_pct", "engine_sys_pct")),
            ("system", ("sys_usr_pct", "sys_sys_pct")),
        )
    }
    n = min(len(s.per_core_pct) for s in recent)
    total = sum(s.dt for s in recent) or 1.0
    cores = tuple(sum(s.per_core_pct[i] * s.dt for s in recent) / total for i in range(n))
    return "CPU (last second)", lines, cores


def console_figures(record: RunRecord | None, log: CpuLog | None) -> tuple[float, float] | None:
    """The console's own (user %, system %) over the window of the engine process's figures beside it:
    the whole run once it ended, else the intervals of the last second; the last second while nothing
    ran."""
    if log is None or not log.readings:
        return None
    if record is None or record.latest is None:
        end = log.readings[-1][0]
        return log.pct_between(end - WINDOW_S, end) or log.pct_between(log.readings[0][0], end)
    r = record.result
    if r is not None and r.cpu:
        if r.seconds <= 0:
            return None
        return 100.0 * record.console_usr_s / r.seconds, 100.0 * record.console_sys_s / r.seconds
    window = record.recent_window()
    return log.pct_between(*window) if window else None


class CpuPanel(Vertical):
    DEFAULT_CSS = """
    CpuPanel > #cpu-figures { height: 5; text-wrap: nowrap; text-overflow: clip; }
    CpuPanel > #cpu-cores { height: 1; }
    CpuPanel > LineChart { height: 1fr; min-height: 0; }
    """

    def __init__(self, **kwargs):
        super().__init__(
            FiguresText(id="cpu-figures"),
            FiguresText(id="cpu-cores"),
            LineChart(_pct_of_one_core, empty="", id="cpu-chart"),
            **kwargs,
        )
        self.border_title = "CPU"

    def show(self, record: RunRecord | None, console_log: CpuLog | None) -> None:
        console = console_figures(record, console_log)
        lines = [f"{'':8}{'usr':>7}{'sys':>7}"]
        cores: tuple[float, ...] = ()
        if record is not None and record.latest is not None:
            self.border_title, values, cores = cpu_figures(record)
            notes = {"process": "engine's, of 1 core", "engine": "workers only", "system": f"of {len(cores)} cores"}
            for name, (usr, sys_) in values.items():
                if name == "engine" and figures.missing(usr) and figures.missing(sys_):
                    continue  # engines that cannot tell their workers' threads apart
                lines.append(f"{name:<8}{figures.pct(usr):>7}{figures.pct(sys_):>7}  {notes[name]}")
        if console is not None:
            lines.append(f"{'console':<8}{figures.pct(console[0]):>7}{figures.pct(console[1]):>7}  of 1 core")
        self.query_one("#cpu-figures", FiguresText).show(Text("\n".join(lines)))
        cores_w = self.query_one("#cpu-cores", FiguresText)
        text = core_lines(cores, cores_w.size.width or 30, len(cores) if len(cores) <= MAX_BAR_LINES else 0)
        rows = max(len(text.plain.rstrip("\n").splitlines()), 1)
        if cores_w.styles.height is None or cores_w.styles.height.value != rows:
            cores_w.styles.height = rows  # a new core count: the one layout change, then repaints only
        cores_w.show(text)
        chart = self.query_one(LineChart)
        if record is None or chart.size.height < 5:  # a chart needs a few rows to say anything
            chart.set_data([])
            self.border_subtitle = ""
            return
        self.border_subtitle = " ".join(f"[{color}]■[/] {name}" for name, _, color in CURVES) + " usr+sys"
        chart.set_data(
            [
                Curve(name, [(s.t, getattr(s, usr) + getattr(s, sys_)) for s in record.history], color)
                for name, (usr, sys_), color in CURVES
            ],
            time_axis_end(record),
        )
