"""Memory sweep results printed the way Intel MLC prints them (tables on stdout, warnings on stderr) or as JSON.

Every section names how its latency chase moved (its locality) and the pages the
buffers got; several results (built-in, an mlc run, an imported mlc output) print
side by side with ``format_side_by_side``.
"""

from __future__ import annotations

import sys
from typing import TextIO

from xferscope.memory.result import (
    IDLE,
    WHOLE_BUFFER,
    cache_curve,
    cache_plateaus,
    idle_points,
    loaded_points,
    matrix_points,
    numa_matrix,
    peak_points,
    result_json,
    rising_plateaus,
    sweep_name,
)
from xferscope.memory.spec import PAGE_SIZE_TEXT, locality_text
from xferscope.records import CacheSize, MemPoint, MemSweep, NumaMatrix
from xferscope.units import figure_text, format_size

TRAFFIC_LABELS = {
    "R": "ALL Reads",
    "W2": "2:1 Reads-Writes",
    "W3": "3:1 Reads-Writes",
    "W5": "1:1 Reads-Writes",
    "W6": "0:1 NT writes",
    "W7": "2:1 Reads-NT writes",
    "W8": "1:1 Reads-NT writes",
    "W9": "3:1 Reads-NT writes",
    "W10": "Stream-triad like",
}


def _series(points: list[MemPoint]) -> list[list[MemPoint]]:
    """Consecutive runs of one traffic type and stride with rising delays."""
    runs: list[list[MemPoint]] = []
    for p in points:
        last = runs[-1][-1] if runs else None
        if last and (last.traffic, last.stride) == (p.traffic, p.stride) and (p.delay or 0) > (last.delay or 0):
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def _stride_text(stride: int | None) -> str:
    return f"stride {stride} B" if stride else "stride not given"


def _where(*parts: str | None) -> str:
    return ", ".join(p for p in parts if p)


def idle_text(point: MemPoint, whole: MemPoint | None = None) -> str:
    """'185.80 ns (64-page locality; whole-buffer 655.30 ns)'; the locality alone when there is no pair."""
    inside = locality_text(point.locality)
    if whole is not None and whole.latency_ns is not None:
        inside = f"{inside}; {WHOLE_BUFFER} {whole.latency_ns:.2f} ns"
    return f"{point.latency_ns:.2f} ns" + (f" ({inside})" if inside else "")


def _idle_lines(result: MemSweep) -> list[str]:
    out = []
    idle = [p for p in idle_points(result.points) if p.latency_ns is not None]
    used: set[int] = set()
    for i, p in enumerate(idle):
        if i in used:
            continue
        whole = None
        if p.locality != WHOLE_BUFFER:
            j = next(
                (
                    j
                    for j in range(i + 1, len(idle))
                    if j not in used and idle[j].stride == p.stride and idle[j].locality == WHOLE_BUFFER
                ),
                None,
            )
            if j is not None:
                used.add(j)
                whole = idle[j]
        spread = f" (min {p.latency_min_ns:.2f}, max {p.latency_max_ns:.2f})" if p.latency_min_ns is not None else ""
        out.append(f"Idle latency: {idle_text(p, whole)}{spread}, {_stride_text(p.stride)}, {p.backend}")
    local = next((p for p in matrix_points(result.points) if p.traffic == IDLE and p.cpu_node == p.mem_node), None)
    if not out and local is not None:
        out.append(
            f"Idle latency: {idle_text(local)}, CPU node {local.cpu_node} to its own memory, "
            f"{_stride_text(local.stride)}, {local.backend}"
        )
    return out


def _peak_lines(peak: list[MemPoint]) -> list[str]:
    """One table, as `mlc --max_bandwidth` prints it."""
    first = peak[0]
    out = [f"Maximum bandwidth (MB/sec, 1 MB = 10^6 bytes), {_stride_text(first.stride)}, {first.backend}"]
    for p in peak:
        label = TRAFFIC_LABELS.get(p.traffic or "", p.traffic)
        split = (
            f"   (read {p.read_mb_s:.1f}, write {p.write_mb_s:.1f})"
            if p.read_mb_s is not None and p.write_mb_s is not None
            else ""
        )
        out.append(f"{label:<17}:\t{p.bandwidth_mb_s:10.1f}{split}")
    return out


def _level_of(size: int, caches: list[CacheSize]) -> str:
    for c in caches:
        if size <= c["size"]:
            return str(c["name"])
    return "memory" if caches else ""


def _curve_lines(result: MemSweep) -> list[str]:
    """lmbench's lat_mem_rd table, the sysfs cache sizes marked between the rows, then the plateaus."""
    caches = list(result.environment.get("caches") or [])
    out: list[str] = []
    by_stride: dict[int | None, list[MemPoint]] = {}
    for p in cache_curve(result.points):
        by_stride.setdefault(p.stride, []).append(p)
    for stride, points in by_stride.items():
        points = sorted(points, key=lambda p: p.size_bytes or 0)
        locality = locality_text(points[0].locality) if points[0].locality != WHOLE_BUFFER else ""
        out.append(
            f"Cache-level curve: latency against working set, {_where(_stride_text(stride), locality, points[0].backend)}"
        )
        out.append(f"{'Size':>10}  {'Latency (ns)':>12}  Level")
        out.append("=" * 34)
        marks = list(caches)
        for p in points:
            while marks and (p.size_bytes or 0) > marks[0]["size"]:
                out.append(f"{'':>10}  {'':>12}  ---- {marks[0]['name']} {format_size(marks[0]['size'])} (sysfs) ----")
                marks.pop(0)
            out.append(
                f"{format_size(p.size_bytes or 0):>10}  {p.latency_ns:>12.2f}  {_level_of(p.size_bytes or 0, caches)}"
            )
        plateaus = cache_plateaus(points, caches)
        if plateaus:
            parts = [
                f"{x['level']} {x['latency_ns']:.1f} ns ({format_size(x['from_bytes'])}-{format_size(x['to_bytes'])})"
                for x in plateaus
            ]
            out.append(f"Plateaus: {', '.join(parts)}; {rising_plateaus(plateaus)} rise in order")
            for x in plateaus:
                if x["ends_early"]:
                    size = next(c["size"] for c in caches if c["name"] == x["level"])
                    out.append(
                        f"Note: the {x['level']} plateau ends at {format_size(x['to_bytes'])}, well before the "
                        f"{format_size(size)} sysfs gives: the cache is shared with others or partitioned"
                    )
        out.append("")
    return out[:-1] if out else out


def _grid(
    title: str, cpu_nodes: list[int], mem_nodes: list[int], rows: list[list[float | None]], fmt: str
) -> list[str]:
    out = [
        title,
        f"{'':>10}{'Memory node':>{10 * len(mem_nodes)}}",
        f"{'CPU node':>10}" + "".join(f"{n:>10}" for n in mem_nodes),
    ]
    for node, row in zip(cpu_nodes, rows):
        out.append(f"{node:>10}" + "".join(f"{'-' if v is None else fmt.format(v):>10}" for v in row))
    return out


def _matrix_lines(result: MemSweep) -> list[str]:
    cells = matrix_points(result.points)
    matrix = numa_matrix(cells)
    if not matrix:
        return []
    locality = next((p.locality for p in cells if p.traffic == IDLE and p.locality), None)
    out: list[str] = []
    if "latency_ns" in matrix:
        out += _grid(
            f"Idle latency matrix (ns), {_where(locality_text(locality), cells[0].backend)}",
            matrix["cpu_nodes"],
            matrix["mem_nodes"],
            matrix["latency_ns"],
            "{:.1f}",
        )
    if "bandwidth_mb_s" in matrix:
        out += [""] if out else []
        out += _grid(
            f"Read bandwidth matrix (MB/sec), {cells[0].backend}",
            matrix["cpu_nodes"],
            matrix["mem_nodes"],
            matrix["bandwidth_mb_s"],
            "{:.1f}",
        )
    return out


def _share(share: float) -> str:
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


def pages_text(result: MemSweep) -> str | None:
    """'asked transparent huge pages (2 MiB), got 100% 2M'."""
    asked = PAGE_SIZE_TEXT.get(result.pages or "", result.pages or "")
    got = ", ".join(f"{_share(share)} {size}" for size, share in result.pages_obtained.items())
    if not asked and not got:
        return None
    return _where(f"asked {asked}" if asked else None, f"got {got}" if got else None)


def format_mlc_table(result: MemSweep) -> str:
    """The result as MLC prints it: idle latency, peak bandwidths, the NUMA matrix, the cache-level curve, and
    one Inject Delay table per loaded-latency curve."""
    out: list[str] = []
    sections = [_idle_lines(result)]
    peak = peak_points(result.points)
    if peak:
        sections.append(_peak_lines(peak))
    sections.append(_matrix_lines(result))
    sections.append(_curve_lines(result))
    for section in sections:
        if section:
            out += [""] + section
    for run in _series(loaded_points(result.points)):
        first = run[0]
        split = all(p.read_mb_s is not None for p in run)
        out.append("")
        out.append(
            f"Loaded latency: traffic {first.traffic}, {_stride_text(first.stride)}, "
            + _where(locality_text(first.locality), first.backend)
        )
        head = f"{'Inject Delay':>12}  {'Latency (ns)':>12}  {'Bandwidth (MB/sec)':>18}"
        out.append(head + (f"  {'Read (MB/sec)':>13}  {'Write (MB/sec)':>14}" if split else ""))
        out.append("=" * len(out[-1]))
        for p in run:
            row = f"{format(p.delay, '05d'):>12}  {p.latency_ns:>12.2f}  {p.bandwidth_mb_s:>18.1f}"
            if split:
                row += f"  {p.read_mb_s:>13.1f}  {p.write_mb_s:>14.1f}"
            out.append(row)
    footer = []
    pages = pages_text(result)
    if pages:
        footer.append(f"Pages: {pages}")
    if result.thp_coverage is not None:
        footer.append(f"THP coverage: {result.thp_coverage:.0%} of the buffers on huge pages")
    ns_iter = result.environment.get("ns_per_delay_iter")
    if ns_iter and loaded_points(result.points):
        footer.append(f"Delay loop: {ns_iter:.3f} ns per iteration (calibrated)")
    footer.extend(f"Note: {n}" for n in result.notes)
    if result.cancelled:
        footer.append(f"Interrupted: {len(result.points)} points measured")
    if footer:
        out.append("")
        out.extend(footer)
    return "\n".join(out).lstrip("\n")


def emit_result(result: MemSweep, fmt: str = "table", out: TextIO | None = None, err: TextIO | None = None) -> None:
    """Print a result: the MLC-shaped table (warnings on ``err``) or JSON."""
    out = out or sys.stdout
    err = err or sys.stderr
    if fmt == "json":
        out.write(result_json(result))
        return
    text = format_mlc_table(result)
    if text:
        out.write(text + "\n")
    for warning in result.warnings:
        err.write(f"warning: {warning}\n")


# ------------------------------------------------------- several results


PEAK_ORDER = ("R", "W3", "W2", "W5", "W10")


def side_by_side(results: list[MemSweep]) -> tuple[list[str], list[list[str]]]:
    """One column per result (a built-in run, an mlc run, an imported mlc output), one row per figure any of
    them has: idle latency and its locality, the whole-buffer chase, pages, the max-bandwidth table, the NUMA
    matrix, the cache curve's plateaus, and each loaded curve's first and last delay."""
    headers = ["", *(sweep_name(r) for r in results)]
    rows: list[list[str]] = []

    def add(label: str, cells: list[str]) -> None:
        if any(cells):
            rows.append([label, *cells])

    add("idle latency (ns)", [figure_text(r.idle_latency_ns, "{:.2f}", missing="") for r in results])
    add("  locality", [locality_text(r.idle_locality) for r in results])
    add(f"  {WHOLE_BUFFER} (ns)", [figure_text(r.whole_idle_latency_ns, "{:.2f}", missing="") for r in results])
    add("pages", [_pages_short(r) for r in results])
    peaks = [{p.traffic or "": p.bandwidth_mb_s for p in peak_points(r.points)} for r in results]
    for traffic in [t for t in PEAK_ORDER if any(t in p for p in peaks)] + sorted(
        {t for p in peaks for t in p if t not in PEAK_ORDER}
    ):
        add(
            f"{TRAFFIC_LABELS.get(traffic, traffic)} (MB/s)",
            [figure_text(p.get(traffic), "{:.1f}", missing="") for p in peaks],
        )
    matrices: list[NumaMatrix] = [r.matrix or {} for r in results]
    cells = sorted({(i, j) for m in matrices for i in m.get("cpu_nodes", []) for j in m.get("mem_nodes", [])})
    for name, fmt in (("latency", "{:.1f}"), ("read MB/s", "{:.1f}")):
        for i, j in cells:
            values = []
            for m in matrices:
                grid = m.get("latency_ns") if name == "latency" else m.get("bandwidth_mb_s")
                if grid and i in m["cpu_nodes"] and j in m["mem_nodes"]:
                    values.append(figure_text(grid[m["cpu_nodes"].index(i)][m["mem_nodes"].index(j)], fmt, missing=""))
                else:
                    values.append("")
            add(f"node {i}->{j} {name}", values)
    plateaus = [{x["level"]: x["latency_ns"] for x in r.cache_levels or []} for r in results]
    levels = list(dict.fromkeys(level for p in plateaus for level in p))
    for level in levels:
        add(f"curve plateau {level} (ns)", [figure_text(p.get(level), "{:.2f}", missing="") for p in plateaus])
    curves: dict[tuple, list[list[MemPoint]]] = {}
    for k, r in enumerate(results):
        for run in _series(loaded_points(r.points)):
            series = (run[0].traffic, run[0].stride)
            curves.setdefault(series, [[] for _ in results])[k] = run
    for (traffic, stride), runs in curves.items():
        for which, label in ((0, "first"), (-1, "last")):
            add(
                f"{traffic}{f' stride {stride}' if stride else ''}, {label} delay",
                [
                    f"{run[which].delay:05d}: {run[which].latency_ns:.1f} ns, {run[which].bandwidth_mb_s:.0f} MB/s"
                    if run
                    else ""
                    for run in runs
                ],
            )
    return headers, rows


def format_side_by_side(results: list[MemSweep]) -> str:
    headers, rows = side_by_side(results)
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = [
        "  ".join(
            str(cell).ljust(w) if i == 0 else str(cell).rjust(w) for i, (cell, w) in enumerate(zip(row, widths))
        ).rstrip()
        for row in [headers, *rows]
    ]
    lines.insert(1, "=" * len(lines[0]))
    return "\n".join(lines)


def _pages_short(result: MemSweep) -> str:
    """'thp: 100% 2M', '4k: 100% 4K', '1g' (asked, then what was obtained)."""
    got = ", ".join(f"{_share(share)} {size}" for size, share in result.pages_obtained.items())
    return ": ".join(x for x in (result.pages or "", got) if x)
