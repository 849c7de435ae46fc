"""The cells of the workloads' tables and CSV files: a figure or "-" where there is none, and a CSV of rows."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def ms(x: float | None) -> str:
    return "-" if x is None else f"{1000 * x:.1f} ms"


def secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def job_line(ranks: int, hosts: int, launcher: str, mpi: str, how: str, slowest_host: str | None) -> str:
    """An MPI job's first line: its ranks and hosts, the launcher and library, ``how`` it ran, the slowest host."""
    return f"  {ranks} rank{'s' * (ranks != 1)} on {hosts} host{'s' * (hosts != 1)} ({launcher}, {mpi}){how}" + (
        f"; slowest host {slowest_host}" if slowest_host and hosts > 1 else ""
    )


def table_csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A header and its rows as CSV text."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def named_csv(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> str:
    """Rows given by column name as CSV text, the ``columns`` in order: a column a row leaves out (or gives as None)
    is an empty cell."""
    return table_csv(columns, ([("" if (v := row.get(c)) is None else v) for c in columns] for row in rows))
