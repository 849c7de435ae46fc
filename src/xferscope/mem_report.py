"""Memory sweep results printed the way Intel MLC prints them (tables on stdout, warnings on stderr) or as JSON."""
from __future__ import annotations

import sys
from typing import TextIO

from xferscope.engines.mem_result import MemPoint, MemResult, result_json

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


def format_mlc_table(result: MemResult) -> str:
    """The result as MLC prints it: idle latency, peak bandwidths, and one Inject Delay table per curve."""
    out: list[str] = []
    for p in result.idle_points:
        spread = f" (min {p.latency_min_ns:.2f}, max {p.latency_max_ns:.2f})" if p.latency_min_ns is not None else ""
        out.append(f"Idle latency: {p.latency_ns:.2f} ns{spread}, {_stride_text(p.stride)}, {p.backend}")
    peak = [p for p in result.curve_points if p.latency_ns is None]
    curves = [p for p in result.curve_points if p.latency_ns is not None]
    if peak:
        out.append("")
        out.append(f"Peak injection bandwidth (MB/sec), {_stride_text(peak[0].stride)}, {peak[0].backend}")
        for p in peak:
            label = TRAFFIC_LABELS.get(p.traffic, p.traffic)
            split = (f"   (read {p.read_mb_s:.1f}, write {p.write_mb_s:.1f})"
                     if p.read_mb_s is not None and p.write_mb_s is not None else "")
            out.append(f"{label:<20}:\t{p.bandwidth_mb_s:10.1f}{split}")
    for run in _series(curves):
        first = run[0]
        split = all(p.read_mb_s is not None for p in run)
        out.append("")
        out.append(f"Loaded latency: traffic {first.traffic}, {_stride_text(first.stride)}, {first.backend}")
        head = f"{'Inject Delay':>12}  {'Latency (ns)':>12}  {'Bandwidth (MB/sec)':>18}"
        out.append(head + (f"  {'Read (MB/sec)':>13}  {'Write (MB/sec)':>14}" if split else ""))
        out.append("=" * len(out[-1]))
        for p in run:
            row = f"{format(p.delay, '05d'):>12}  {p.latency_ns:>12.2f}  {p.bandwidth_mb_s:>18.1f}"
            if split:
                row += f"  {p.read_mb_s:>13.1f}  {p.write_mb_s:>14.1f}"
            out.append(row)
    footer = []
    if result.thp_coverage is not None:
        footer.append(f"THP coverage: {result.thp_coverage:.0%} of the buffers on huge pages")
    ns_iter = result.environment.get("ns_per_delay_iter")
    if ns_iter:
        footer.append(f"Delay loop: {ns_iter:.3f} ns per iteration (calibrated)")
    if result.cancelled:
        footer.append(f"Interrupted: {len(result.points)} points measured")
    if footer:
        out.append("")
        out.extend(footer)
    return "\n".join(out).lstrip("\n")


def emit_result(result: MemResult, fmt: str = "table", out: TextIO | None = None, err: TextIO | None = None) -> None:
    """Print a result: the MLC-shaped table (warnings on ``err``) or JSON."""
    out = out or sys.stdout
    err = err or sys.stderr
    if fmt == "json":
        out.write(result_json(result) + "\n")
        return
    text = format_mlc_table(result)
    if text:
        out.write(text + "\n")
    for warning in result.warnings:
        err.write(f"warning: {warning}\n")
