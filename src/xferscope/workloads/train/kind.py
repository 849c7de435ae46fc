"""train as the registry of workloads holds it (``workloads.registry``): its record, its files (a run, a
comparison, a --find-max search), DLIO's training summary.json, saved runs ranked by the accelerators they sustain
and AU, a run on this host, and its text."""

from __future__ import annotations

from xferscope.workloads.common.kind import RunProgress, WorkloadKind
from xferscope.workloads.train import text
from xferscope.workloads.train.options import TrainRequest
from xferscope.workloads.train.train import TrainSession
from xferscope.workloads.train.train_compare import DLIO_AU, TrainComparison, load_entries, rank
from xferscope.workloads.train.train_data import page_cache_warning
from xferscope.workloads.train.train_record import KIND, FindMaxResult, TrainResult


def compare_saved(files: list[str]) -> TrainComparison:
    return TrainComparison(rounds=0, entries=rank([e for f in files for e in load_entries(f)]))


def measure(request: TrainRequest, rounds: int, progress: RunProgress) -> TrainResult | FindMaxResult | TrainComparison:
    """The data set made (or found), then one run, a --find-max search, or the paths side by side in ``rounds``."""
    paths, upper, tick = request.paths, request.upper, progress.tick
    session = TrainSession(request.spec)
    try:
        warning = page_cache_warning(session.prepare(progress.fill, list(dict.fromkeys(paths))))
        if warning:
            progress.warn(warning)
        if len(paths) > 1:
            return session.compare_paths(
                paths, rounds, find_max_upper=upper if request.find_max else None, on_tick=tick
            )
        return session.find_max(upper, on_tick=tick) if request.find_max else session.run(on_tick=tick)
    finally:
        session.close()


TRAIN = WorkloadKind(
    "train",
    TrainResult,
    {KIND: TrainResult, KIND + "-comparison": TrainComparison, KIND + "-find-max": FindMaxResult},
    compare_saved,
    measure,
    text.train_text,
    text.csv_text,
    text.tick_text,
    dlio_metric=DLIO_AU,
)
