"""A sweep's results as a table (one row per point, or per delay of a memory sweep) and as JSON for stdout."""

from __future__ import annotations

from typing import Any

from xferscope import records
from xferscope.compare.verdict import MARGIN, rule_text
from xferscope.report import text_table
from xferscope.sweep.against import Ratio, mem_key
from xferscope.sweep.record import ResultsFile
from xferscope.sweep.stats import io_stats, mem_rows, mem_where
from xferscope.units import figure_text, format_size

IO_HEADERS = (
    "#",
    "point",
    "reps",
    "MiB/s",
    "stdev",
    "min",
    "max",
    "IOPS",
    "avg lat (us)",
    "p99 (us)",
    "usr %",
    "sys %",
    "CPU-s/GiB",
    "first-done MiB/s",
    "last-done MiB/s",
    "PCIe RX MB/s",
)
#: the columns of a sweep's table kept at any terminal width: the point, its figure and range, cost, ratio, verdict
SUMMARY_FIRST_COLUMNS = (
    "point",
    "MiB/s",
    "min",
    "max",
    "CPU-s/GiB",
    "traffic",
    "stride",
    "delay",
    "latency (ns)",
    "bandwidth (MB/s)",
    "ratio",
    "verdict",
)
MEM_HEADERS = (
    "#",
    "traffic",
    "stride",
    "delay",
    "where",
    "reps",
    "latency (ns)",
    "stdev",
    "bandwidth (MB/s)",
    "stdev",
    "read MB/s",
    "write MB/s",
)


def where_text(row: dict) -> str:
    """A memory row's locality, working set and matrix cell: '64-page', '48K 64-page', 'node 0->1'."""

    parts = []
    if row.get("size_bytes") is not None and row.get("traffic") == "curve":
        parts.append(format_size(row["size_bytes"]))
    if row.get("locality"):
        parts.append(str(row["locality"]))
    if row.get("cpu_node") is not None:
        parts.append(f"node {row['cpu_node']}->{row['mem_node']}")
    return " ".join(parts)


def _reps(rec, target: int) -> str:
    n = rec.ok_count()
    text = str(n) if n >= target else f"{n}/{target}"
    return text + (" failed" if rec.status == "failed" else "")


def _against_cells(r: Ratio | None) -> list[str]:
    """old figure, ratio (with the range of the repetitions' ratios), verdict."""
    if r is None or r.ratio is None:
        return [figure_text(r.old if r else None, "{:,.1f}"), "-", "-"]
    v = r.verdict
    return [
        figure_text(r.old, "{:,.1f}"),
        v.spread() if v and v.rounds > 1 else figure_text(r.ratio, "{:.2f}"),
        v.text if v else "-",
    ]


def io_rows(results: ResultsFile, ratios: dict[str, Ratio]) -> list[tuple[str, ...]]:
    target = results.profile.repetitions
    rows = []
    for rec in results.planned():
        if rec.status == "skipped" or (not rec.repetitions and rec.status == "pending"):
            continue
        st = io_stats(rec.repetitions)
        med = {k: v["median"] for k, v in st.items()}
        tp = st["throughput_mib_s"]
        row = [
            str(rec.index),
            rec.label,
            _reps(rec, target),
            figure_text(tp["median"], "{:,.1f}"),
            figure_text(tp["stdev"], "{:,.1f}"),
            figure_text(tp["min"], "{:,.1f}"),
            figure_text(tp["max"], "{:,.1f}"),
            figure_text(med["iops"], "{:,.0f}"),
            figure_text(med["lat_mean_us"], "{:,.1f}"),
            figure_text(med["lat_p99_us"], "{:,.1f}"),
            figure_text(med["cpu_usr_pct"], "{:,.1f}"),
            figure_text(med["cpu_sys_pct"], "{:,.1f}"),
            figure_text(med["cpu_s_per_gib"], "{:.3f}"),
            figure_text(med["first_done_mib_s"], "{:,.1f}"),
            figure_text(med["last_done_mib_s"], "{:,.1f}"),
            figure_text(med["pcie_rx_mb_s"], "{:,.0f}"),
        ]
        if ratios:
            row += _against_cells(ratios.get(rec.key))
        rows.append(tuple(row))
    return rows


def mem_table_rows(results: ResultsFile, ratios: dict[str, Ratio]) -> list[tuple[str, ...]]:

    target = results.profile.repetitions
    rows = []
    for rec in results.planned():
        for mr in mem_rows(rec.repetitions):
            lat, bw = mr["latency_ns"], mr["bandwidth_mb_s"]
            row = [
                str(rec.index),
                str(mr["traffic"]),
                str(mr["stride"]),
                "idle" if mr["delay"] is None else str(mr["delay"]),
                where_text(mr),
                _reps(rec, target),
                figure_text(lat["median"], "{:.2f}"),
                figure_text(lat["stdev"], "{:.2f}"),
                figure_text(bw["median"], "{:,.1f}"),
                figure_text(bw["stdev"], "{:,.1f}"),
                figure_text(mr["read_mb_s"]["median"], "{:,.1f}"),
                figure_text(mr["write_mb_s"]["median"], "{:,.1f}"),
            ]
            if ratios:
                row += _against_cells(
                    ratios.get(mem_key(rec.identity, mr["traffic"], mr["stride"], mr["delay"], **mem_where(mr)))
                )
            rows.append(tuple(row))
    return rows


def summary_table(results: ResultsFile, ratios: list[Ratio] | None = None, title: str | None = None):
    """A Rich table of the sweep, with old figures and ratios when ``ratios`` is given."""

    by_key = {r.key: r for r in ratios or []}
    headers = IO_HEADERS if results.kind == "io" else MEM_HEADERS
    rows = io_rows(results, by_key) if results.kind == "io" else mem_table_rows(results, by_key)
    if ratios is not None:
        headers = headers + (("old MiB/s" if results.kind == "io" else "old MB/s"), "ratio", "verdict")
    if results.kind == "io" and rows and all(row[IO_HEADERS.index("PCIe RX MB/s")] == "-" for row in rows):
        drop = IO_HEADERS.index("PCIe RX MB/s")  # no GPU telemetry in this sweep: no empty column
        headers = headers[:drop] + headers[drop + 1 :]
        rows = [row[:drop] + row[drop + 1 :] for row in rows]
    return text_table(headers, rows, left=("point", "traffic", "verdict"), title=title, whole=("point",))


def skipped_lines(results: ResultsFile) -> list[str]:
    """'N points skipped: reason' for each reason, with the first few point numbers."""
    by_reason: dict[str, list[int]] = {}
    for rec in results.planned():
        if rec.status == "skipped":
            by_reason.setdefault(rec.reason or "no reason given", []).append(rec.index)
    lines = []
    for reason, indices in by_reason.items():
        shown = ", ".join(map(str, indices[:8])) + (", ..." if len(indices) > 8 else "")
        lines.append(f"skipped {len(indices)} point{'s' if len(indices) > 1 else ''} ({shown}): {reason}")
    return lines


def _verdict_fields(r: Ratio) -> dict[str, Any]:
    v = r.verdict
    return {
        "verdict": v.word if v else None,
        "ratio_min": v.low if v else None,
        "ratio_max": v.high if v else None,
        "new_values": list(r.new_values),
        "old_values": list(r.old_values),
    }


def summary_json(results: ResultsFile, ratios: list[Ratio] | None = None) -> dict[str, Any]:
    """What ``replay --format json`` prints: the points with statistics, without their repetitions."""
    points = []
    for rec in results.planned():
        d = records.as_data(rec.to_record(results.kind))
        d.pop("repetitions")
        points.append(d)
    out: dict[str, Any] = {
        "profile": results.profile.name,
        "kind": results.kind,
        "results_file": results.path,
        "csv_file": results.csv_path,
        "points": points,
    }
    if ratios is not None:
        out["against"] = [
            {
                "key": r.key,
                "label": r.label,
                "new": r.new,
                "old": r.old,
                "ratio": r.ratio,
                "latency_ratio": r.latency_ratio,
                **_verdict_fields(r),
            }
            for r in ratios
        ]
        margin = ratios[0].margin if ratios else MARGIN
        out["rule"] = rule_text(margin, repeated=True)
        out["margin"] = margin
    return out
