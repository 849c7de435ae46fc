"""A workload as the layers above it iterate it (``workloads.registry``): its name, the record of its runs
(the schema of its files), the kinds of file it saves, its saved runs ranked side by side (`workload compare`), how
it runs on this host (``measure``), and its records in words and in CSV; the terminal's part (a live line, the
files written, the exit) is the same for every workload (``output.workload_run``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple


class RunProgress(NamedTuple):
    """What a run on this host tells as it goes, each None where nothing is shown: its data set being made (done,
    of), a tick of the run (the workload's own); and a warning, one line."""

    fill: Callable[[int, int], None] | None
    tick: Callable[[Any], None] | None
    warn: Callable[[str], None]


def as_it_is(result: Any) -> Any:
    return result


@dataclass(frozen=True)
class WorkloadKind:
    name: str  # as the CLI names it: `xferscope workload NAME`
    record: type  # a run's record (`xferscope schema NAME`)
    files: dict[str, type]  # the ``kind`` of each file it saves (a run, its paths side by side, ...): its record
    compare_saved: Callable[[list[str]], Any]  # saved files of it (each known to be of it) ranked side by side
    #: (its command's request, rounds, RunProgress) -> what it measured on this host: a run's record, its paths side by
    #: side, or what else its command asks for (checkpoint's --plan)
    measure: Callable[[Any, int, RunProgress], Any]
    lines: Callable[[Any], list[Any]]  # what ``measure`` or ``compare_saved`` gave, in words (lines and tables)
    csv: Callable[[Any], str]  # the same as ``--csv`` writes it
    tick_text: Callable[[Any], str]  # a tick of a run as the live line shows it
    dlio_metric: str | None = None  # the key of DLIO's summary.json ``metric`` that makes the summary one of it
    record_of: Callable[[Any], Any] = as_it_is  # what ``--json`` writes of what ``measure`` gave
