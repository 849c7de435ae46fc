"""train as the registry of workloads holds it (``commands.workload_kinds``): its record, its files (a run, a
comparison, a --find-max search), DLIO's training summary.json, and saved runs ranked by the accelerators they
sustain and AU."""

from __future__ import annotations

from xferscope.workloads.common.kind import WorkloadKind
from xferscope.workloads.train.train_compare import DLIO_AU, TrainComparison, load_entries, rank
from xferscope.workloads.train.train_record import KIND, FindMaxResult, TrainResult


def compare_saved(files: list[str]) -> TrainComparison:
    return TrainComparison(rounds=0, entries=rank([e for f in files for e in load_entries(f)]))


TRAIN = WorkloadKind(
    "train",
    TrainResult,
    {KIND: TrainResult, KIND + "-comparison": TrainComparison, KIND + "-find-max": FindMaxResult},
    compare_saved,
    dlio_metric=DLIO_AU,
)
