"""CPU use: the process, the whole system, the console itself, and every core."""
from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical

from xferscope.app import figures
from xferscope.app.braille import bar, level
from xferscope.app.session import RunRecord
from xferscope.app.widgets.figures_line import FiguresText


def _load_style(pct: float) -> str:
    return "green" if pct < 50 else "yellow" if pct < 85 else "red"


def core_lines(cores: tuple[float, ...] | list[float], width: int, height: int) -> Text:
    """One bar a core when they fit, else one cell a core (its height is the load), wrapped to ``width``."""
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
        for pct in cores[start:start + per_row]:
            out.append(level(pct / 100), style=_load_style(pct))
        out.append("\n")
    out.append(f"{len(cores)} cores, one cell each; full cell = 100%", style="dim")
    return out


class CpuPanel(Vertical):
    DEFAULT_CSS = """
    CpuPanel > #cpu-figures { height: 5; text-wrap: nowrap; text-overflow: clip; }
    CpuPanel > #cpu-cores { height: 1fr; }
    """

    def __init__(self, **kwargs):
        super().__init__(FiguresText(id="cpu-figures"), FiguresText(id="cpu-cores"), **kwargs)
        self.border_title = "CPU"

    def show(self, record: RunRecord | None, console: tuple[float, float] | None) -> None:
        figs = self.query_one("#cpu-figures", FiguresText)
        cores_w = self.query_one("#cpu-cores", FiguresText)
        s = record.latest if record else None
        lines = []
        if record is not None and record.result is not None and record.result.cpu:
            cpu = record.result.cpu
            self.border_title = "CPU (whole run)"
            proc = (cpu.get("usr_pct"), cpu.get("sys_pct"))
            engine = (cpu.get("engine_usr_pct"), cpu.get("engine_sys_pct"))
            system = (cpu.get("sys_usr_pct"), cpu.get("sys_sys_pct"))
            cores = cpu.get("per_core_pct") or ()
        elif s is not None:
            self.border_title = "CPU"
            proc = (s.cpu_usr_pct, s.cpu_sys_pct)
            engine = (s.engine_usr_pct, s.engine_sys_pct)
            system = (s.sys_usr_pct, s.sys_sys_pct)
            cores = s.per_core_pct
        else:
            proc = engine = system = None
            cores = ()
        lines.append(f"{'':8}{'usr':>7}{'sys':>7}")
        if proc is not None:
            lines.append(f"process {figures.pct(proc[0]):>7}{figures.pct(proc[1]):>7}  of 1 core")
            if not (figures.missing(engine[0]) and figures.missing(engine[1])):
                lines.append(f"engine  {figures.pct(engine[0]):>7}{figures.pct(engine[1]):>7}  workers only")
            lines.append(f"system  {figures.pct(system[0]):>7}{figures.pct(system[1]):>7}  of {len(cores)} cores")
        if console is not None:
            lines.append(f"console {figures.pct(console[0]):>7}{figures.pct(console[1]):>7}  of 1 core")
        figs.show(Text("\n".join(lines)))
        size = cores_w.size
        cores_w.show(core_lines(tuple(cores), size.width or 30, size.height or 4))
