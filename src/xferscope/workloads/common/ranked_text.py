"""What every workload prints of its paths side by side: the entries ranked (``side_by_side``), a row each, with
the rule that makes two level; and which rows are the libraries themselves."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xferscope.report import text_table
from xferscope.units import figure_text
from xferscope.workloads.common.level import LEVEL_RULE
from xferscope.workloads.common.side_by_side import Entry


def ranked_lines(
    title: str,
    entries: list[Entry],
    figure: str,
    fmt: Callable[[float | None], str],
    status: str,
    beside: str | None = None,
) -> list[Any]:
    """The entries ranked, a row each; ``beside``: the name of their second figure (shown after GB/s)."""
    rows = [
        (
            i,
            e.label,
            e.runs,
            fmt(e.value),
            "-" if e.low is None else f"{fmt(e.low)}-{fmt(e.high)}",
            figure_text(e.gb_per_s, "{:.2f}"),
            *([fmt(e.beside)] if beside else []),
            figure_text(e.cpu_s_per_gib, "{:.3f}"),
            ", ".join(e.level_with) or "-",
        )
        for i, e in enumerate(entries, 1)
    ]
    headers = ("#", "path", "runs", figure, "range", "GB/s", *([beside] if beside else []), "CPU-s/GiB", "level with")
    lines: list[Any] = [title, text_table(headers, rows, left=("path", "level with"))]
    also = f"GB/s, {beside} and CPU-s/GiB" if beside else "GB/s and CPU-s/GiB"
    lines.append(f"  ranked: the lowest median {figure} first ({also}: the medians of the same runs); {LEVEL_RULE}")
    if status != "ok":
        lines.append(f"  {status.upper()}: the rounds measured until then")
    return lines


def library_lines(
    results: Sequence[Any],
    imitation: str = "xferscope's own reading of the shards as safetensors does (mapped, copied from pageable memory)",
) -> list[str]:
    """Which rows are the libraries themselves (``results``' ``library`` facts), and which is xferscope's imitation
    of one (``imitation``: what host does)."""
    libs = {r.path: r.library for r in results if r.library is not None}
    if not libs:
        return []
    said = ", ".join(f"{p} ({lib.package} {lib.version})" for p, lib in libs.items())
    torch = next(iter(libs.values())).torch
    lines = [f"  the libraries themselves, on torch {torch}: {said}"]
    if "host" in {r.path for r in results}:
        lines.append(f"  host: {imitation}")
    return lines
