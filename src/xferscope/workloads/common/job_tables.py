"""An MPI job's record as the workloads print it: its line, then a table of its hosts and one of its ranks, the
columns every kind shares (host, ranks, RAM, CPUs; rank, host, status) around the kind's own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xferscope.report import text_table
from xferscope.units import format_bytes
from xferscope.workloads.common.cells import job_line
from xferscope.workloads.common.job_ranks import JobHostRow, JobRankRow

#: a column of a kind's own: its header, and its cell from a row
Column = tuple[str, Callable[[Any], object]]


def gpus_cell(row: JobRankRow, none: str = "-") -> str:
    """A rank's GPUs ("0,1"), or ``none`` where its data stayed in host memory."""
    return ",".join(map(str, row.gpus)) or none


def job_tables(
    job: Any,
    how: str,
    host_columns: Sequence[Column],
    rank_columns: Sequence[Column],
    titles: tuple[str | None, str | None] = (None, None),
) -> list[Any]:
    """``job`` (a ``JobRecord`` with its ``hosts`` and ``per_rank``): the job's line (``how`` it ran), its hosts and
    its ranks, each with the kind's columns."""
    line = job_line(job.ranks, len(job.hosts), job.launcher, job.mpi, how, job.slowest_host)
    return [line, *host_and_rank_tables(job, host_columns, rank_columns, titles)]


def host_and_rank_tables(
    job: Any,
    host_columns: Sequence[Column],
    rank_columns: Sequence[Column],
    titles: tuple[str | None, str | None] = (None, None),
    left: tuple[str, ...] = (),
) -> list[Any]:
    """A table of ``job``'s hosts and one of its ranks: the columns every kind shares around the kind's own (those
    named in ``left`` aligned left)."""

    def host_cells(h: JobHostRow) -> tuple[object, ...]:
        memory = "-" if h.memory_bytes is None else format_bytes(h.memory_bytes)
        cpus = "-" if h.cpus is None else h.cpus
        return (h.host, ",".join(map(str, h.ranks)), *(cell(h) for _, cell in host_columns), memory, cpus)

    def rank_cells(k: JobRankRow) -> tuple[object, ...]:
        status = k.status if k.error is None else f"{k.status}: {k.error}"
        return (k.rank, k.host, *(cell(k) for _, cell in rank_columns), status)

    return [
        text_table(
            ("host", "ranks", *(name for name, _ in host_columns), "RAM", "CPUs"),
            [host_cells(h) for h in job.hosts],
            left=("host", "ranks", *left),
            title=titles[0],
        ),
        text_table(
            ("rank", "host", *(name for name, _ in rank_columns), "status"),
            [rank_cells(k) for k in job.per_rank],
            left=("host", "status"),
            title=titles[1],
        ),
    ]
