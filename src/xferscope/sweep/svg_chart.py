"""A Chart as a standalone SVG document: panels in two columns, lines (or grouped bars), error bars, legends."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

from xferscope.sweep.chart import Chart, Panel, tick_text

PANEL_W, PANEL_H = 560, 340
LEFT, RIGHT, TOP, BOTTOM = 72, 180, 34, 52
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering lo..hi."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(lo / step) * step
    count = max(1, math.ceil((hi - start) / step - 1e-9))
    return [round(start + i * step, 10) for i in range(count + 1)]


def _fmt(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


class _Frame:
    """Maps data coordinates to pixels inside one panel."""

    def __init__(self, panel: Panel, ox: float, oy: float):
        self.panel = panel
        self.x0, self.y0 = ox + LEFT, oy + TOP
        self.w, self.h = PANEL_W - LEFT - RIGHT, PANEL_H - TOP - BOTTOM
        xs = [x for s in panel.series for x, _, _ in s.points]
        ys = [y + (e if e == e else 0) for s in panel.series for _, y, e in s.points]
        if panel.categories is not None:
            self.x_lo, self.x_hi = -0.5, len(panel.categories) - 0.5
        elif panel.x_log:
            self.x_lo, self.x_hi = math.log2(min(xs)) - 0.25, math.log2(max(xs)) + 0.25
        else:
            ticks = nice_ticks(min(0.0, min(xs)), max(xs))
            self.x_lo, self.x_hi = ticks[0], ticks[-1]
        if panel.y_log:
            positive = [y for y in ys if y > 0] or [1.0]
            lo, hi = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
            self.y_lo, self.y_hi = float(lo), float(max(hi, lo + 1))
            self.y_ticks = [
                10.0**k * m for k in range(lo, int(self.y_hi) + 1) for m in (1, 2, 5) if 10.0**k * m <= 10.0**self.y_hi
            ]
        else:
            self.y_ticks = nice_ticks(0.0, max(ys) * 1.05 if ys and max(ys) > 0 else 1.0)
            self.y_lo, self.y_hi = 0.0, self.y_ticks[-1]

    def px(self, x: float) -> float:
        v = math.log2(x) if self.panel.x_log and self.panel.categories is None else x
        return self.x0 + (v - self.x_lo) / (self.x_hi - self.x_lo) * self.w

    def py(self, y: float) -> float:
        if self.panel.y_log:
            v = math.log10(y) if y > 0 else self.y_lo
            return self.y0 + self.h - (v - self.y_lo) / (self.y_hi - self.y_lo) * self.h
        return self.y0 + self.h - max(0.0, y) / self.y_hi * self.h


def _text(x: float, y: float, text: str, anchor: str = "middle", size: int = 11, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def _axes(f: _Frame) -> list[str]:
    out = [f'<rect x="{f.x0:.1f}" y="{f.y0:.1f}" width="{f.w:.1f}" height="{f.h:.1f}" fill="none" stroke="#444"/>']
    for t in f.y_ticks:
        y = f.py(t)
        out.append(f'<line x1="{f.x0:.1f}" y1="{y:.1f}" x2="{f.x0 + f.w:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(_text(f.x0 - 6, y + 4, _fmt(t), "end"))
    panel = f.panel
    if panel.categories is not None:
        ticks = [(float(i), c) for i, c in enumerate(panel.categories)]
    elif panel.x_log:
        xs = panel.x_ticks or sorted({x for s in panel.series for x, _, _ in s.points})
        ticks = [(x, tick_text(panel, x)) for x in xs]
    else:
        ticks = [(t, _fmt(t)) for t in nice_ticks(f.x_lo, f.x_hi)]
    for x, label in ticks:
        px = f.px(x)
        out.append(f'<line x1="{px:.1f}" y1="{f.y0 + f.h:.1f}" x2="{px:.1f}" y2="{f.y0 + f.h + 4:.1f}" stroke="#444"/>')
        out.append(_text(px, f.y0 + f.h + 16, label))
    out.append(_text(f.x0 + f.w / 2, f.y0 + f.h + 36, panel.x_label))
    cy = f.y0 + f.h / 2
    out.append(_text(f.x0 - 52, cy, panel.y_label, extra=f' transform="rotate(-90 {f.x0 - 52:.1f} {cy:.1f})"'))
    if panel.title:
        out.append(_text(f.x0 + f.w / 2, f.y0 - 12, panel.title, size=12, extra=' font-weight="bold"'))
    return out


def _marks_of(f: _Frame) -> list[str]:
    """Vertical dashed lines at the panel's marks (cache sizes), labelled at the top."""
    out = []
    for i, (x, label) in enumerate(f.panel.marks):
        px = f.px(x)
        if not f.x0 <= px <= f.x0 + f.w:
            continue
        out.append(
            f'<line x1="{px:.1f}" y1="{f.y0:.1f}" x2="{px:.1f}" y2="{f.y0 + f.h:.1f}" stroke="#888" '
            'stroke-dasharray="4 3"/>'
        )
        out.append(_text(px + 3, f.y0 + 12 + 12 * (i % 2), label, "start", 10, ' fill="#555"'))
    return out


def _error_bar(x: float, y_lo: float, y_hi: float, color: str) -> str:
    return (
        f'<line x1="{x:.1f}" y1="{y_lo:.1f}" x2="{x:.1f}" y2="{y_hi:.1f}" stroke="{color}"/>'
        f'<line x1="{x - 3:.1f}" y1="{y_lo:.1f}" x2="{x + 3:.1f}" y2="{y_lo:.1f}" stroke="{color}"/>'
        f'<line x1="{x - 3:.1f}" y1="{y_hi:.1f}" x2="{x + 3:.1f}" y2="{y_hi:.1f}" stroke="{color}"/>'
    )


def _marks(f: _Frame) -> list[str]:
    out = []
    panel = f.panel
    n = len(panel.series)
    for i, series in enumerate(panel.series):
        color = PALETTE[i % len(PALETTE)]
        if panel.categories is not None:
            slot = 0.8 / n
            for x, y, err in series.points:
                left = f.px(x - 0.4 + i * slot)
                width = f.px(x - 0.4 + (i + 1) * slot) - left - 1
                top = f.py(y)
                out.append(
                    f'<rect x="{left:.1f}" y="{top:.1f}" width="{max(width, 1):.1f}" '
                    f'height="{f.y0 + f.h - top:.1f}" fill="{color}"/>'
                )
                if err == err and err > 0:
                    out.append(_error_bar(left + width / 2, f.py(y - err), f.py(y + err), "#222"))
            continue
        coords = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for x, y, _ in series.points)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="1.6"/>')
        for x, y, err in series.points:
            out.append(f'<circle cx="{f.px(x):.1f}" cy="{f.py(y):.1f}" r="2.6" fill="{color}"/>')
            if err == err and err > 0:
                out.append(_error_bar(f.px(x), f.py(y - err), f.py(y + err), color))
    return out


def _legend(f: _Frame) -> list[str]:
    out = []
    x = f.x0 + f.w + 14
    for i, series in enumerate(f.panel.series[:18]):
        y = f.y0 + 6 + i * 16
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{x:.1f}" y="{y - 8:.1f}" width="10" height="10" fill="{color}"/>')
        out.append(_text(x + 15, y + 1, series.name, "start", 10))
    return out


def render_svg(chart: Chart) -> str:
    columns = 1 if len(chart.panels) == 1 else 2
    rows = math.ceil(len(chart.panels) / columns)
    width, height = columns * PANEL_W, rows * PANEL_H + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        _text(width / 2, 20, chart.title, size=14, extra=' font-weight="bold"'),
    ]
    for i, panel in enumerate(chart.panels):
        frame = _Frame(panel, (i % columns) * PANEL_W, 30 + (i // columns) * PANEL_H)
        parts += _axes(frame) + _marks_of(frame) + _marks(frame) + _legend(frame)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
