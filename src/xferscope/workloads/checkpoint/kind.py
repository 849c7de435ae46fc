"""checkpoint as the registry of workloads holds it (``commands.workload_kinds``): its record, its files, and saved runs
ranked (`workload compare`): xferscope's checkpoint records (a run, or every path of a side-by-side) and DLIO's
checkpointing ``summary.json``, by the time until a save is durable with the restore time beside it, as the live
side-by-side ranks them.

DLIO's summary holds means over its checkpoints (``save_checkpoint_duration_mean_seconds``, ``load_...``); its
``..._GB_per_second`` is GiB/s (its checkpoint size is summed in GiB), turned into GB/s here as xferscope gives it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from xferscope.errors import FormatError
from xferscope.workloads.checkpoint.session import CheckpointComparison, CheckpointRecord
from xferscope.workloads.common.kind import WorkloadKind
from xferscope.workloads.common.side_by_side import entries, saved_records, saved_runs

#: the kinds of xferscope's checkpoint files: a run, several paths side by side
FILES: dict[str, type] = {"checkpoint": CheckpointRecord, "workload-checkpoint-compare": CheckpointComparison}
#: what makes DLIO's summary.json one of a checkpointing run
DLIO_SAVE = "save_checkpoint_duration_mean_seconds"
GIB_IN_GB = (1 << 30) / 1e9


@dataclass(frozen=True)
class _DlioPath:
    path: str = "dlio"


@dataclass(frozen=True)
class DlioCheckpoints:
    """DLIO's checkpointing summary as a run to rank: its means over its checkpoints."""

    save_seconds: float
    restore_seconds: float | None
    gb_per_s: float | None
    status: str = "ok"
    cpu_s_per_gib: float | None = None
    spec: _DlioPath = field(default_factory=_DlioPath)

    def host_rows(self) -> list[tuple[str, float | None, float | None, float | None]]:
        """DLIO's summary has no host's figures."""
        return []


def dlio_checkpoints(path: str, data: dict) -> DlioCheckpoints:
    metric = data["metric"]
    try:
        save = float(metric[DLIO_SAVE])
        load = metric.get("load_checkpoint_duration_mean_seconds")
        rate = metric.get("save_checkpoint_io_mean_GB_per_second")
        return DlioCheckpoints(
            save_seconds=save,
            restore_seconds=None if load is None else float(load),
            gb_per_s=None if rate is None else float(rate) * GIB_IN_GB,
        )
    except (TypeError, ValueError) as exc:
        raise FormatError(path, None, f"not a DLIO checkpointing summary.json: {exc}") from None


def _runs_of(path: str) -> list[Any]:
    with open(path, "rb") as fh:
        data = json.loads(fh.read())  # the registry read it as JSON already
    if data.get("kind") in FILES:
        return saved_records(path, FILES, "a checkpoint")
    return [dlio_checkpoints(path, data)]


def compare_saved(files: list[str]) -> CheckpointComparison:
    """The saved runs ranked."""
    runs = saved_runs(files, _runs_of)
    ranked = entries(runs, lambda r: r.save_seconds, beside=lambda r: r.restore_seconds)
    records = [r for _, rs in runs.values() for r in rs if isinstance(r, CheckpointRecord)]
    return CheckpointComparison(rounds=0, entries=ranked, results=records)


CHECKPOINT = WorkloadKind("checkpoint", CheckpointRecord, FILES, compare_saved, dlio_metric=DLIO_SAVE)
