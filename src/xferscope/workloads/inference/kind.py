"""kvcache and load as the registry of workloads holds them (``workloads.registry``): their records, their
files, saved runs of one of them ranked as the live side-by-side ranks them (by restore time, by load time), a run
on this host (its paths side by side in rotated rounds), and their text."""

from __future__ import annotations

from typing import Any

from xferscope.workloads.common.kind import RunProgress, WorkloadKind
from xferscope.workloads.common.side_by_side import HostRun, entries, saved_records, saved_runs
from xferscope.workloads.inference import text
from xferscope.workloads.inference.kvcache import KvComparison, KvSession
from xferscope.workloads.inference.kvcache_record import KIND as KV_KIND
from xferscope.workloads.inference.kvcache_record import KvResult
from xferscope.workloads.inference.load import LoadComparison, LoadSession
from xferscope.workloads.inference.load_record import KIND as LOAD_KIND
from xferscope.workloads.inference.load_record import LoadResult
from xferscope.workloads.inference.options import InferenceRequest

#: the kinds of file each writes: a run, its paths side by side
KV_FILES: dict[str, type] = {KV_KIND: KvResult, KV_KIND + "-compare": KvComparison}
LOAD_FILES: dict[str, type] = {LOAD_KIND: LoadResult, LOAD_KIND + "-compare": LoadComparison}


def compare_kvcache(files: list[str]) -> KvComparison:
    runs = saved_runs(files, lambda f: saved_records(f, KV_FILES, "a kvcache"))
    every = [r for _, rs in runs.values() for r in rs if not isinstance(r, HostRun)]
    return KvComparison(rounds=0, entries=entries(runs, lambda r: r.restore_p50_s), results=every)


def compare_load(files: list[str]) -> LoadComparison:
    runs = saved_runs(files, lambda f: saved_records(f, LOAD_FILES, "a load"))
    every = [r for _, rs in runs.values() for r in rs if not isinstance(r, HostRun)]
    return LoadComparison(rounds=0, entries=entries(runs, lambda r: r.load_s), results=every)


def _measure(session: Any, request: InferenceRequest, rounds: int, progress: RunProgress) -> Any:
    """The data made (or found), then one run, or the paths side by side in ``rounds``."""
    paths = request.paths
    try:
        session.prepare(progress.fill, list(dict.fromkeys(paths)))
        if len(paths) > 1:
            return session.compare_paths(paths, rounds, progress.tick)
        return session.run(on_tick=progress.tick)
    finally:
        session.close()


def measure_kvcache(request: InferenceRequest, rounds: int, progress: RunProgress) -> KvResult | KvComparison:
    return _measure(KvSession(request.spec), request, rounds, progress)


def measure_load(request: InferenceRequest, rounds: int, progress: RunProgress) -> LoadResult | LoadComparison:
    return _measure(LoadSession(request.spec), request, rounds, progress)


KVCACHE = WorkloadKind(
    "kvcache", KvResult, KV_FILES, compare_kvcache, measure_kvcache, text.kvcache_text, text.kv_csv, text.tick_text
)
LOAD = WorkloadKind(
    "load", LoadResult, LOAD_FILES, compare_load, measure_load, text.load_text, text.load_csv, text.tick_text
)
