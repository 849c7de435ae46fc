"""Text people paste into reports: gdsio's result line, what gdsio leaves out, and comparison tables."""

from __future__ import annotations

import math
from collections.abc import Sequence

from xferscope.engines.base import RunResult, Sample
from xferscope.spec import GDSIO_IO_NAME
from xferscope.units import figure_text, format_rate


def _dataset_bytes(r: RunResult) -> int:
    """The size of the files the run used (as measured when it ran), else what the spec asked for."""
    measured = r.environment.get("dataset_bytes")
    if measured:
        return int(measured)
    return r.spec.file_size * (r.spec.workers if r.spec.directory else 1)


def gdsio_line(r: RunResult) -> str:
    """The line gdsio prints, with the same fields and units."""
    spec = r.spec
    return (
        f"IoType: {GDSIO_IO_NAME[spec.io]} XferType: {spec.xfer_type} Threads: {spec.workers} "
        f"DataSetSize: {r.bytes // 1024}/{_dataset_bytes(r) // 1024}(KiB) "
        f"IOSize: {spec.block_size // 1024}(KiB) Throughput: {r.throughput_gib_s:.6f} GiB/sec, "
        f"Avg_Latency: {r.latency_us.mean:.6f} usecs ops: {r.ops} total_time {r.seconds:.6f} secs"
    )


def extras_line(r: RunResult) -> str:
    """What gdsio leaves out: percentiles, IOPS, CPU cost, and how the data moved."""
    lat = r.latency_us
    cpu = r.cpu
    parts = [
        f"IOPS: {r.iops:,.0f}",
        f"Latency(usecs): p50 {figure_text(lat.p50)} p90 {figure_text(lat.p90)} p99 {figure_text(lat.p99)} p99.9 {figure_text(lat.p999)} max {figure_text(lat.max)}",
        f"CPU: usr {figure_text(cpu.get('usr_pct'))}% sys {figure_text(cpu.get('sys_pct'))}% (process, % of one core); "
        f"system usr {figure_text(cpu.get('sys_usr_pct'))}% sys {figure_text(cpu.get('sys_sys_pct'))}%",
        f"CPU-s/GiB: {figure_text(r.cpu_seconds_per_gib, '{:.3f}')}",
    ]
    pcie = pcie_text(r)
    if pcie:
        parts.append(pcie)
    if r.labels:
        parts.append("[" + ", ".join(r.labels) + "]")
    if r.status != "ok":
        parts.append(f"status: {r.status}" + (f" ({r.error})" if r.error else ""))
    return " | ".join(parts)


def pcie_text(r: RunResult) -> str | None:
    """'PCIe RX (NVML, mean): GPU 0 1,234 MB/s (2% of link)' for the GPUs a run's telemetry read."""
    shown = []
    for index, g in sorted(r.gpus.items()):
        parts = []
        for key, word in (("pcie_rx_mb_s", "RX"), ("pcie_tx_mb_s", "TX")):
            if g.get(key) is None:
                continue
            pct = g.get(key.replace("_mb_s", "_pct_of_link"))
            parts.append(f"{word} {g[key]:,.0f} MB/s" + (f" ({pct:.0f}% of link)" if pct is not None else ""))
        if parts:
            shown.append(f"GPU {index} " + " ".join(parts))
    return "PCIe (NVML, mean): " + "; ".join(shown) if shown else None


def done_line(r: RunResult) -> str | None:
    """elbencho's first-done / last-done figures, when there were several workers."""
    if r.spec.workers < 2 or not r.first_done or not r.last_done:
        return None
    first, last = r.first_done, r.last_done
    return (
        f"First done: {first.seconds:.3f} s, {first.throughput_mib_s:,.1f} MiB/s, {first.iops:,.0f} IOPS | "
        f"Last done: {last.seconds:.3f} s, {last.throughput_mib_s:,.1f} MiB/s, {last.iops:,.0f} IOPS"
    )


def progress_text(s: Sample, duration: float | None) -> str:
    total = f"/{duration:.0f}s" if duration else "s"
    return (
        f"{s.t:6.1f}{total}  {format_rate(s.throughput_gib_s * (1 << 30)):>12}  {s.iops:>10,.0f} IOPS  "
        f"lat avg {figure_text(s.latency_us.mean)} p99 {figure_text(s.latency_us.p99)} us  "
        f"cpu usr {s.cpu_usr_pct:.0f}% sys {s.cpu_sys_pct:.0f}%"
    )


#: what a row's run is: its path and shape
SHAPE_HEADERS = ("path", "io", "block", "workers", "qd")
#: its latency and CPU figures
COST_HEADERS = ("avg lat (us)", "p99 lat (us)", "usr CPU %", "sys CPU %", "CPU-s/GiB")
COMPARE_HEADERS = (*SHAPE_HEADERS, "MiB/s", "IOPS", *COST_HEADERS, "ratio")


def path_qualifiers(r: RunResult) -> list[str]:
    """What a path's name alone does not say: through the page cache (asked for, or not), compat mode."""
    quals = []
    if getattr(r.spec, "source", "storage") == "cache":
        quals.append("from cache")
    elif r.environment.get("io_mode") == "buffered":
        quals.append("buffered" if r.spec.buffered else "page cache")
    if r.environment.get("cufile_mode") == "compat":
        quals.append("compat")
    return quals


def compare_rows(results: Sequence[RunResult], baseline: int = 0) -> list[tuple[str, ...]]:
    """Rows in seed 001's shape; ratio is bandwidth against ``results[baseline]``."""
    base = results[baseline].throughput_mib_s if results else 0.0
    rows = []
    for r in results:
        ratio = r.throughput_mib_s / base if base > 0 else math.nan
        path = r.spec.path + (f" ({', '.join(q)})" if (q := path_qualifiers(r)) else "")
        if r.source != "xferscope":
            path += f" [{r.source}]"
        rows.append(
            (
                path,
                r.spec.io,
                r.spec.block_text,
                str(r.spec.workers),
                str(r.spec.iodepth),
                figure_text(r.throughput_mib_s),
                figure_text(r.iops, "{:,.0f}"),
                figure_text(r.latency_us.mean),
                figure_text(r.latency_us.p99),
                figure_text(r.cpu.get("usr_pct")),
                figure_text(r.cpu.get("sys_pct")),
                figure_text(r.cpu_seconds_per_gib, "{:.3f}"),
                figure_text(ratio, "{:.2f}"),
            )
        )
    return rows


def advice_notes(results: Sequence[RunResult]) -> list[str]:
    """Suggestions to print under a comparison: where a run would clearly gain from ``--split``
    (the rule is ``engines.split.split_advice``, which the saturation finder uses too)."""
    from xferscope.engines.split import split_advice

    notes: list[str] = []
    for r in results:
        line = split_advice(r.spec.path, r.spec.block_size, r.spec.split, r.environment.get("cufile_mode"))
        if line and line not in notes:
            notes.append(line)
    return notes


def compare_table(results: Sequence[RunResult], baseline: int = 0, title: str | None = None):
    """A Rich table of several results side by side."""
    return text_table(COMPARE_HEADERS, compare_rows(results, baseline), left=("path", "io"), title=title)


#: ``--wide``: every column of a table at any terminal width (set once by the command that prints it)
_every_column = False
#: the columns a reader needs first, kept at any width: the path and its figures, their range, the cost, the ratio
#: and the verdict (tables name theirs in these words)
FIRST_COLUMNS = (
    "#",
    "path",
    "acc",
    "MiB/s",
    "min-max",
    "CPU-s/GiB",
    "ratio (range)",
    "ratio",
    "verdict",
    "AU",
    "range",
    "samples/s",
    "MB/s",
    "GB/s",
    "restore p50",
    "load time",
    "level with",
)


def text_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    left: Sequence[str] = ("path",),
    title: str | None = None,
    whole: Sequence[str] = ("path",),
):
    """A Rich table of text cells (``print_table`` prints it): the ``left`` columns aligned left, the rest (figures)
    right; the ``whole`` columns never wrap. Cells are text, never Rich markup ("[fio]")."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, header_style="bold")
    for h in headers:
        table.add_column(h, justify="left" if h in left else "right", no_wrap=h in whole, overflow="fold")
    for row in rows:
        table.add_row(*(escape(str(cell)) for cell in row))
    return table


#: set by an MPI launcher in every rank: a rank's output goes through the launcher's, at a width it cannot know, to
#: wherever the launcher's own output goes (Open MPI gives each rank a pseudo-terminal even when that is a pipe)
MPI_RANK_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK")


def _terminal(console) -> bool:
    """Output for a person at a terminal of the console's width (not a pipe, a file, nor an MPI rank's)."""
    import os

    return console.is_terminal and not any(k in os.environ for k in MPI_RANK_ENV)


def stdout_console(width: int | None = None):
    """A Rich console on stdout: a terminal's own (its colours, and its width unless ``width``) for a person at a
    terminal; plain text without one escape code into a pipe, a file or an MPI rank's output."""
    from rich.console import Console

    screen = Console(width=width)
    if _terminal(screen):
        return screen
    return Console(width=width, force_terminal=False, color_system=None)


def terminal_width() -> int | None:
    """The width of the terminal tables print to; None into a pipe, a file or an MPI rank's output."""
    screen = stdout_console()
    return screen.width if _terminal(screen) else None


def show_every_column(on: bool = True) -> None:
    """``--wide``: tables print every column at any terminal width (cells fold where they must)."""
    global _every_column
    _every_column = on


def print_table(table, first: Sequence[str] = FIRST_COLUMNS) -> None:
    """Print a Rich table whole. Into a file or pipe: at the table's own width, every column, one line per row. In
    a terminal: the ``first`` columns always, and the others, from the left, only while the table fits the
    terminal's width (a line then names those left out; ``--wide`` shows every one); figures are never broken and
    words wrap at their ends."""
    from rich.console import Console

    screen = stdout_console()
    if not _terminal(screen):
        width = Console(width=4000).measure(table).maximum
        stdout_console(width=max(80, width)).print(table)
        return
    if _every_column:
        screen.print(table)
        return
    fitted, left_out = fit_columns(table, screen.width, first)
    screen.print(fitted)
    if left_out:
        screen.print(
            f"left out at {screen.width} columns: {', '.join(left_out)} (--wide shows them; --json and --csv hold "
            "every figure)",
            highlight=False,
        )


def say(line: str) -> None:
    """One line of text under a table: in a terminal wrapped at word ends to its width (a long rule is never broken
    mid-word); into a file or pipe as it is."""
    import sys

    screen = stdout_console()
    if _terminal(screen):
        screen.print(line, highlight=False, markup=False)
    else:
        sys.stdout.write(line + "\n")


def fit_columns(table, width: int, first: Sequence[str]):
    """(a copy of ``table`` that fits ``width``, the headers left out): the columns not in ``first`` (a name there
    keeps one column of that name, the first) are left out from the right until the table's natural width fits, or
    none is left; right-aligned columns (figures) never wrap, the others wrap at word ends."""
    from rich.console import Console
    from rich.table import Table

    columns = list(table.columns)
    cells = [list(c.cells) for c in columns]
    kept: set[int] = set()  # each name in ``first`` keeps one column: the first of that name not kept yet
    for name in first:
        i = next((i for i, c in enumerate(columns) if str(c.header) == name and i not in kept), None)
        if i is not None:
            kept.add(i)
    optional = [i for i in range(len(columns)) if i not in kept]

    def build(keep: list[int]) -> Table:
        out = Table(title=table.title, header_style=table.header_style, caption=table.caption)
        for i in keep:
            c = columns[i]
            figure = c.justify == "right"
            out.add_column(c.header, justify=c.justify, no_wrap=figure or c.no_wrap, overflow="fold", style=c.style)
        for row in range(table.row_count):
            out.add_row(*(cells[i][row] for i in keep))
        return out

    keep = list(range(len(columns)))
    measure = Console(width=4000)
    while optional and measure.measure(build(keep)).maximum > width:
        keep.remove(optional.pop())
    return build(keep), [str(columns[i].header) for i in range(len(columns)) if i not in keep]


ROUNDS_HEADERS = (*SHAPE_HEADERS, "rounds", "MiB/s", "min-max", "IOPS", *COST_HEADERS, "ratio (range)", "verdict")


def rounds_rows(comp) -> list[tuple[str, ...]]:
    """One row per path of a ``rounds.RoundsComparison``: medians over its rounds, the throughput's range, the
    median paired ratio to the baseline with its range, and the verdict."""
    rows = []
    for slot, label in enumerate(comp.labels):
        spec = comp.specs[slot]
        measured = [run.result for run in comp.runs if run.slot == slot and run.ok]
        quals = path_qualifiers(measured[0]) if measured else []
        med = {
            key: comp.spread(slot, key)
            for key in (
                "throughput_mib_s",
                "iops",
                "lat_mean_us",
                "lat_p99_us",
                "cpu_usr_pct",
                "cpu_sys_pct",
                "cpu_s_per_gib",
            )
        }
        tp = med["throughput_mib_s"]
        planned = sum(1 for run in comp.runs if run.slot == slot)
        if slot == 0:
            ratio, word = "1.00", "baseline"
        else:
            v = comp.verdict(slot)
            ratio, word = (v.spread(), v.text) if v else ("-", "no paired round")
        rows.append(
            (
                label + (f" ({', '.join(quals)})" if quals else ""),
                spec.io,
                spec.block_text,
                str(spec.workers),
                str(spec.iodepth),
                str(tp["n"]) if tp["n"] == planned else f"{tp['n']}/{planned}",
                figure_text(tp["median"]),
                f"{figure_text(tp['min'])}-{figure_text(tp['max'])}" if tp["n"] else "-",
                figure_text(med["iops"]["median"], "{:,.0f}"),
                figure_text(med["lat_mean_us"]["median"]),
                figure_text(med["lat_p99_us"]["median"]),
                figure_text(med["cpu_usr_pct"]["median"]),
                figure_text(med["cpu_sys_pct"]["median"]),
                figure_text(med["cpu_s_per_gib"]["median"], "{:.3f}"),
                ratio,
                word,
            )
        )
    return rows


def rounds_table(comp, title: str | None = None):
    """A Rich table of a comparison in rounds (``rounds_rows``); ``comp.notes()`` go under it."""
    return text_table(ROUNDS_HEADERS, rounds_rows(comp), left=("path", "io", "verdict"), title=title)
