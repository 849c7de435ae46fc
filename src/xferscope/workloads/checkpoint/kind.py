"""checkpoint as the registry of workloads holds it (``workloads.registry``): its record, its files, and saved runs
ranked (`workload compare`): xferscope's checkpoint records (a run, or every path of a side-by-side) and DLIO's
checkpointing ``summary.json``, by the time until a save is durable with the restore time beside it, as the live
side-by-side ranks them; a run on this host (or its plan), and its text.

DLIO's summary holds means over its checkpoints (``save_checkpoint_duration_mean_seconds``, ``load_...``); its
``..._GB_per_second`` is GiB/s (its checkpoint size is summed in GiB), turned into GB/s here as xferscope gives it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from xferscope.errors import FormatError, SpecError
from xferscope.workloads.checkpoint import text
from xferscope.workloads.checkpoint.options import CheckpointRequest
from xferscope.workloads.checkpoint.plan import CheckpointPlan, plan_record
from xferscope.workloads.checkpoint.session import (
    CheckpointComparison,
    CheckpointRecord,
    compare_paths,
    run_checkpoints,
)
from xferscope.workloads.common.kind import RunProgress, WorkloadKind
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


def measure(
    request: CheckpointRequest, rounds: int, progress: RunProgress
) -> CheckpointRecord | CheckpointComparison | CheckpointPlan:
    """Every path's spec checked first (one line before anything is written), then the plan (``--plan``), or the
    run (several paths: in rotated rounds)."""
    spec, paths, options = request.spec, request.paths, request.options
    if rounds < 1:
        raise SpecError("rounds", f"must be at least 1, got {rounds}")
    if options.every < 0:
        raise SpecError("every", f"seconds of 0 or more, got {options.every:g}")
    # each path planned once: an unknown path, or a state it cannot write from, is one line before anything runs
    plans = {p: dataclasses.replace(spec, path=p).plan() for p in dict.fromkeys(paths)}
    if request.plan_only and len(paths) > 1:
        raise SpecError("plan", "--plan is of one path; several paths are for a run")
    if request.plan_only:
        return plans[paths[0]]
    if len(paths) > 1:
        return compare_paths(plans, paths, rounds, options, progress.tick)
    return run_checkpoints(plans[paths[0]], options, progress.tick)


def _record_of(result: Any) -> Any:
    return plan_record(result) if isinstance(result, CheckpointPlan) else result


CHECKPOINT = WorkloadKind(
    "checkpoint",
    CheckpointRecord,
    FILES,
    compare_saved,
    measure,
    text.checkpoint_text,
    text.checkpoint_csv,
    text.tick_text,
    dlio_metric=DLIO_SAVE,
    record_of=_record_of,
)
