"""A saturation as text: per search its knee, plateau, latency, Little's law, CPU cost and the bottleneck line."""

from __future__ import annotations

from xferscope.report import print_table, text_table
from xferscope.saturate.ceilings import CEILING_RULE, gib, verdict_line
from xferscope.saturate.execute import SaturationOutcome, SeriesOutcome
from xferscope.saturate.record import verdict_rule
from xferscope.saturate.search import SEARCH_RULE
from xferscope.units import figure_text


def count_line(o: SeriesOutcome) -> str:
    """'9 of 64 points of the full grid (14%), 46 runs'."""
    return (
        f"{o.points_measured} of {o.grid_points} points of the full grid ({o.share_of_grid:.0%}), "
        f"{o.found.measurements} runs"
    )


def series_lines(o: SeriesOutcome) -> list[str]:
    s, found, fig = o.series, o.found, o.figures
    title = s.label + (" (storage reference)" if s.role != "measured" else "")
    lines = [f"{title}: {count_line(o)}"]
    if fig is None:
        lines.append("  nothing measured" + (f": {o.error}" if o.error else ""))
        return lines
    per_rank = f" per rank, {fig.ranks} ranks" if fig.ranks > 1 else ""
    lines.append(
        f"  knee {fig.knee.label}{per_rank} ({fig.concurrency} in flight): {gib(fig.knee_gib_s)}, "
        f"{fig.knee_iops:,.0f} IOPS, latency mean {figure_text(fig.lat_mean_us)} us p99 {figure_text(fig.lat_p99_us)} us, "
        f"CPU-s/GiB {figure_text(fig.cpu_s_per_gib, '{:.3f}')}"
    )
    lines.append(
        f"  plateau {gib(fig.plateau_gib_s)} (the median of the points on it; at {fig.plateau.label}, runs "
        f"{fig.plateau_min_gib_s:.2f}-{fig.plateau_max_gib_s:.2f}, {fig.plateau_iops:,.0f} IOPS)"
    )
    if found.flat is not None:
        lines.append(f"  {found.flat.text('GiB/s')}")
    if fig.little_ratio is not None:
        lines.append(
            f"  Little's law: {fig.concurrency} in flight, IOPS x latency {fig.little_in_flight:.1f} "
            f"({fig.little_ratio:.0%})"
        )
    if found.stopped:
        lines.append(f"  search stopped: {found.stopped}")
    if o.bottleneck is not None:
        lines.append("  " + verdict_line(o.evidence, o.bottleneck))
        lines.extend(f"  advice: {a}" for a in o.bottleneck.advice)
    return lines


#: a search's points at any terminal width: where, how fast, its runs' range, and which is the knee
POINT_FIRST_COLUMNS = ("in flight", "GiB/s", "min-max", "")


def points_table(o: SeriesOutcome, title: str | None = None):
    """The points of one search, by concurrency: median, spread, runs, and which is the knee and the plateau."""

    found = o.found
    rows = [
        (
            p.shape.concurrency,
            p.shape.workers,
            p.shape.iodepth,
            figure_text(p.median, "{:.3f}"),
            f"{figure_text(p.low, '{:.3f}')}-{figure_text(p.high, '{:.3f}')}",
            len(p.measurements),
            p.stage,
            " ".join(word for word, shape in (("knee", found.knee), ("plateau", found.plateau)) if p.shape == shape),
        )
        for p in found.points
    ]
    headers = ("in flight", "workers", "qd", "GiB/s", "min-max", "runs", "stage", "")
    return text_table(headers, rows, left=("stage", ""), title=title, whole=())


def print_saturation(outcome: SaturationOutcome, echo, *, tables: bool = True) -> None:

    for o in outcome.series:
        if tables and o.found.points:
            print_table(points_table(o, title=o.series.label), first=POINT_FIRST_COLUMNS)
        for line in series_lines(o):
            echo(line)
    verdicts = [verdict_line(o.evidence, o.bottleneck) for o in outcome.series if o.bottleneck is not None]
    if verdicts:
        echo("")
        echo("Verdicts:")
        for line in verdicts:
            echo("  " + line)
    total_points = sum(o.points_measured for o in outcome.series)
    total_grid = sum(o.grid_points for o in outcome.series)
    if total_grid:
        echo(
            f"measured {total_points} of {total_grid} points of the full grids ({total_points / total_grid:.0%}), "
            f"{sum(o.found.measurements for o in outcome.series)} runs"
        )
    if outcome.storage_source:
        echo(f"storage ceilings from {outcome.storage_source}")
    echo(SEARCH_RULE)

    echo(f"told apart by: {verdict_rule(outcome.plan.margin)}")
    echo(f"ceilings: {CEILING_RULE}")


def progress_text(series_label: str, index: int, total: int, shape_label: str, points: int, runs: int) -> str:
    return f"[{index}/{total}] {series_label}: {shape_label} (points {points}, runs {runs})"
