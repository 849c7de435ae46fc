"""Saved KV-cache restores and model loads side by side (`workload compare`, `compare --workload`): each file's
runs (a single run, or every path of a side-by-side) as entries, ranked as the live side-by-side ranks them. Files
of the two kinds do not mix; a file that is neither is one line naming it."""

from __future__ import annotations

import json
import os
from typing import Any

from xferscope.errors import FormatError, SpecError
from xferscope.workloads.common.records import decode_as
from xferscope.workloads.common.side_by_side import HostRun, add_hosts, entries
from xferscope.workloads.inference.kvcache import KvComparison
from xferscope.workloads.inference.kvcache_record import KIND as KV_KIND
from xferscope.workloads.inference.kvcache_record import KvResult
from xferscope.workloads.inference.load import LoadComparison
from xferscope.workloads.inference.load_record import KIND as LOAD_KIND
from xferscope.workloads.inference.load_record import LoadResult

#: the kinds of file each workload's comparison reads: (single run, side-by-side)
KINDS = {
    "kvcache": (KV_KIND, KV_KIND + "-compare"),
    "load": (LOAD_KIND, LOAD_KIND + "-compare"),
}


def kind_of(path: str) -> str | None:
    """kvcache or load for such a saved file, None for any other (a training record, DLIO's summary, …)."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    kind = data.get("kind") if isinstance(data, dict) else None
    return next((name for name, kinds in KINDS.items() if kind in kinds), None)


def _results(path: str, workload: str) -> list[Any]:
    single = KINDS[workload][0]
    with open(path, "rb") as fh:
        raw = fh.read()
    kind = json.loads(raw).get("kind")
    what = "a kvcache" if workload == "kvcache" else "a load"
    if kind == single:
        return [decode_as(KvResult if workload == "kvcache" else LoadResult, raw, path, f"{what} result")]
    compared: KvComparison | LoadComparison
    if workload == "kvcache":
        compared = decode_as(KvComparison, raw, path, f"{what} comparison")
    else:
        compared = decode_as(LoadComparison, raw, path, f"{what} comparison")
    return list(compared.results)


def compare_saved(files: list[str]) -> KvComparison | LoadComparison:
    for f in files:
        try:
            with open(f, "rb"):
                pass
        except OSError as exc:
            raise FormatError(f, None, f"cannot read it: {exc.strerror}") from None
    kinds = {f: kind_of(f) for f in files}
    found = {k for k in kinds.values() if k is not None}
    if len(found) > 1 or (found and None in kinds.values()):
        odd = ", ".join(f"{os.path.basename(f)} ({k or 'neither'})" for f, k in kinds.items())
        raise SpecError("workload", f"saved runs of one workload compare: {odd}")
    if not found:
        raise FormatError(files[0], None, "neither a kvcache nor a load result")
    workload = found.pop()
    runs: dict[str, tuple[str, list[Any]]] = {}
    for f in files:
        name = os.path.basename(f)
        results = _results(f, workload)
        paths = {r.spec.path for r in results}
        for r in results:
            label = name if len(paths) == 1 else f"{name}:{r.spec.path}"
            runs.setdefault(label, (r.spec.path, []))[1].append(r)
            add_hosts(runs, label, r.spec.path, r.host_rows())  # an MPI job's hosts beside it
    every = [r for _, rs in runs.values() for r in rs if not isinstance(r, HostRun)]
    if workload == "kvcache":
        return KvComparison(rounds=0, entries=entries(runs, lambda r: r.restore_p50_s), results=every)
    return LoadComparison(rounds=0, entries=entries(runs, lambda r: r.load_s), results=every)
