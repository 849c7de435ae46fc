"""What a sweep's plot shows, independent of how it is drawn (SVG here, PNG through matplotlib).

For transfer sweeps: median MiB/s with standard-deviation bars against the grid's
numeric field with the most values (block size, depth, workers), one line per value
of the last other field, one panel per combination of the rest; when no field is
numeric, grouped bars. For memory sweeps: the loaded-latency curve, latency (ns)
against bandwidth (MB/s), one line per traffic type and stride; and for one memory
result (``mem --plot``), its cache-level curve (latency against working-set size,
both axes logarithmic, the cache sizes read from sysfs marked) or its loaded curve.
"""

from __future__ import annotations

import itertools
import os
from types import SimpleNamespace
from typing import Any

from xferscope.errors import SpecError
from xferscope.sweep.chart import Chart, Panel, PlotLine
from xferscope.sweep.plan import combo_text
from xferscope.sweep.record import ResultsFile
from xferscope.sweep.stats import io_stats, mem_rows
from xferscope.units import format_size

FORMATS = (".svg", ".png")
NUMERIC_AXES = ("block_size", "iodepth", "workers", "rwmix", "file_size")


def check_plot_path(path: str) -> str:
    """The format of ``path`` (.svg or .png); SpecError otherwise, or when .png has no matplotlib."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise SpecError("plot", f"{path}: plots are written as .svg or .png; name the file so")
    if ext == ".png":
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise SpecError("plot", "a .png plot needs matplotlib: pip install matplotlib, or write .svg") from None
    return ext


def _value_text(axis: str, value: Any) -> str:
    return combo_text({axis: value}).split("=", 1)[1]


def io_chart(results: ResultsFile) -> Chart:
    profile = results.profile
    axes = list(profile.grid)
    records = [r for r in results.planned() if r.ok_count()]
    numeric = [a for a in axes if a in NUMERIC_AXES]
    x_axis = max(numeric, key=lambda a: len(profile.grid[a])) if numeric else (axes[0] if axes else None)
    rest = [a for a in axes if a != x_axis]
    series_axis = rest[-1] if rest else None
    panel_axes = rest[:-1]
    categorical = x_axis is None or x_axis not in NUMERIC_AXES
    categories = (
        [_value_text(x_axis, v) for v in profile.grid[x_axis]]
        if x_axis and categorical
        else ([records[0].label] if records and x_axis is None else None)
    )
    x_values = profile.grid.get(x_axis, []) if x_axis else []
    x_log = not categorical and min(x_values) > 0 and max(x_values) / min(x_values) >= 8
    panels = []
    for panel_values in itertools.product(*(profile.grid[a] for a in panel_axes)):
        fixed = dict(zip(panel_axes, panel_values))
        panel = Panel(
            title=combo_text(fixed),
            x_label=(x_axis or "point").replace("_", " "),
            y_label="MiB/s (median, bars: stdev)",
            categories=categories,
            x_log=x_log,
            x_is_size=x_axis in ("block_size", "file_size"),
        )
        for series_value in profile.grid[series_axis] if series_axis else [None]:
            name = _value_text(series_axis, series_value) if series_axis else "median"
            series = PlotLine(f"{series_axis}={name}" if series_axis else name)
            for rec in records:
                params = rec.params
                if any(params.get(a) != v for a, v in fixed.items()):
                    continue
                if series_axis and params.get(series_axis) != series_value:
                    continue
                st = io_stats(rec.repetitions)["throughput_mib_s"]
                if x_axis is None:
                    x = 0.0
                elif categorical:
                    x = float(categories.index(_value_text(x_axis, params[x_axis])))
                else:
                    x = float(params[x_axis])
                series.points.append((x, st["median"], st["stdev"]))
            if series.points:
                series.points.sort()
                panel.series.append(series)
        if panel.series:
            panels.append(panel)
    return Chart(f"{profile.name}: throughput", panels)


def mem_chart(results: ResultsFile) -> Chart:
    panel = Panel(title="latency against bandwidth", x_label="bandwidth (MB/s)", y_label="latency (ns, median)")
    curves: dict[str, list[tuple[float, float, float]]] = {}
    cache_points = []
    for rec in results.planned():
        for row in mem_rows(rec.repetitions):
            if row["traffic"] == "curve":
                several = len(rec.identity.get("stride") or []) > 1
                series = (rec.label or "curve") + (f", stride {row['stride']}" if several else "")
                cache_points.append(
                    SimpleNamespace(
                        size_bytes=row["size_bytes"],
                        stride=row["stride"],
                        series=series,
                        locality=row["locality"],
                        latency_ns=row["latency_ns"]["median"],
                    )
                )
                continue
            bw, lat = row["bandwidth_mb_s"]["median"], row["latency_ns"]["median"]
            if row["delay"] is None or bw != bw or lat != lat:
                continue
            name = f"{row['traffic']} stride {row['stride']}"
            curves.setdefault(name, []).append((bw, lat, row["latency_ns"]["stdev"]))
    panel.series = [PlotLine(name, sorted(points)) for name, points in curves.items()]
    panels = [panel] if panel.series else []
    if cache_points:
        caches = (getattr(results, "environment", None) or {}).get("caches") or []
        curve = cache_curve_panel(cache_points, caches, "latency against working-set size")
        panels += [curve] if curve else []
    return Chart(f"{results.profile.name}: " + ("loaded latency" if panel.series else "cache-level curve"), panels)


def chart_of(results: ResultsFile) -> Chart:
    return mem_chart(results) if results.kind == "mem" else io_chart(results)


def size_ticks(lo: float, hi: float) -> list[float]:
    """Powers of four from ``lo`` to ``hi`` (4K, 16K, 64K, ...): ticks that read on a log size axis."""
    out, x = [], 4096.0
    while x < lo:
        x *= 4
    while x <= hi:
        out.append(x)
        x *= 4
    return out


def cache_curve_panel(points, caches, title: str) -> Panel | None:
    """Latency against working-set size, one line per stride, cache sizes (sysfs) marked."""
    series: dict[str, list[tuple[float, float, float]]] = {}
    for p in points:
        if p.size_bytes and p.latency_ns:
            name = getattr(p, "series", None) or f"stride {p.stride}" + (f", {p.locality}" if p.locality else "")
            series.setdefault(name, []).append((float(p.size_bytes), p.latency_ns, float("nan")))
    if not series:
        return None
    xs = [x for pts in series.values() for x, _, _ in pts]
    marks = [
        (float(c["size"]), f"{c['name']} {format_size(c['size'])}")
        for c in caches
        if c.get("size") and c["size"] <= 2 * max(xs)
    ]  # a mark far beyond the points would squeeze them
    return Panel(
        title=title,
        x_label="working set (bytes)",
        y_label="latency (ns)",
        series=[PlotLine(name, sorted(pts)) for name, pts in series.items()],
        x_log=True,
        x_is_size=True,
        y_log=True,
        x_ticks=size_ticks(min(xs), max(xs)),
        marks=marks,
    )


def mem_result_chart(result) -> Chart:
    """One memory sweep (a ``MemSweep``): its cache-level curve, else its loaded-latency curves."""
    from xferscope.memory.result import cache_curve, loaded_points, sweep_name

    name, curve = sweep_name(result), cache_curve(result.points)
    if curve:
        panel = cache_curve_panel(
            curve,
            result.environment.get("caches") or [],
            "latency against working-set size (cache sizes from sysfs)",
        )
        return Chart(f"{name}: cache-level curve", [panel] if panel else [])
    panel = Panel(title="latency against bandwidth", x_label="bandwidth (MB/s)", y_label="latency (ns)")
    curves: dict[str, list[tuple[float, float, float]]] = {}
    for p in loaded_points(result.points):
        key = f"{p.traffic} stride {p.stride}" + (f", {p.locality}" if p.locality else "")
        curves.setdefault(key, []).append((p.bandwidth_mb_s, p.latency_ns, float("nan")))
    panel.series = [PlotLine(k, sorted(v)) for k, v in curves.items()]
    return Chart(f"{name}: loaded latency", [panel] if panel.series else [])


def render_plot(path: str, results: ResultsFile) -> str | bytes | None:
    """The sweep drawn for ``path`` (SVG text or PNG bytes, by its extension); None when no point has been
    measured yet."""
    return render_chart(path, chart_of(results))


def render_chart(path: str, chart: Chart) -> str | bytes | None:
    """``chart`` drawn for ``path`` (SVG text or PNG bytes, by its extension); None when it has nothing to draw."""
    ext = check_plot_path(path)
    if not chart.panels:
        return None
    if ext == ".svg":
        from xferscope.sweep.svg_chart import render_svg

        return render_svg(chart)
    from xferscope.sweep.png_chart import render_png

    return render_png(chart)
