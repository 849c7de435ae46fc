"""kvcache and load as the registry of workloads holds them (``commands.workload_kinds``): their records, their
files, and saved runs of one of them ranked as the live side-by-side ranks them (by restore time, by load time)."""

from __future__ import annotations

from xferscope.workloads.common.kind import WorkloadKind
from xferscope.workloads.common.side_by_side import HostRun, entries, saved_records, saved_runs
from xferscope.workloads.inference.kvcache import KvComparison
from xferscope.workloads.inference.kvcache_record import KIND as KV_KIND
from xferscope.workloads.inference.kvcache_record import KvResult
from xferscope.workloads.inference.load import LoadComparison
from xferscope.workloads.inference.load_record import KIND as LOAD_KIND
from xferscope.workloads.inference.load_record import LoadResult

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


KVCACHE = WorkloadKind("kvcache", KvResult, KV_FILES, compare_kvcache)
LOAD = WorkloadKind("load", LoadResult, LOAD_FILES, compare_load)
