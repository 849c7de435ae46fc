"""A workload as the layers above it iterate it (``commands.workload_kinds``): its name, the record of its runs
(the schema of its files), the kinds of file it saves, the metric that marks DLIO's summary.json of it, and its
saved runs ranked side by side (`workload compare`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WorkloadKind:
    name: str  # as the CLI names it: `xferscope workload NAME`
    record: type  # a run's record (`xferscope schema NAME`)
    files: dict[str, type]  # the ``kind`` of each file it saves (a run, its paths side by side, ...): its record
    compare_saved: Callable[[list[str]], Any]  # saved files of it (each known to be of it) ranked side by side
    dlio_metric: str | None = None  # the key of DLIO's summary.json ``metric`` that makes the summary one of it
