"""Which workload a saved file is of (``kinds``: every workload, as ``workloads.registry`` registers them): its
``kind``, or the metric of DLIO's summary.json; a file none of them reads is one line naming it, and files of two
workloads do not compare."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from xferscope.errors import FormatError, SpecError
from xferscope.workloads.common.kind import WorkloadKind


def workload_of(path: str, kinds: Sequence[WorkloadKind]) -> WorkloadKind:
    """The workload whose saved file ``path`` is (FormatError naming the file where it is none of them)."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read())
    except OSError as exc:
        raise FormatError(path, None, f"cannot read it: {exc.strerror}") from None
    except ValueError as exc:
        raise FormatError(path, None, f"not JSON: {exc}") from None
    kind = data.get("kind") if isinstance(data, dict) else None
    metric = data.get("metric") if isinstance(data, dict) else None
    for w in kinds:
        if kind in w.files or (kind is None and isinstance(metric, dict) and w.dlio_metric in metric):
            return w
    if kind is None and isinstance(metric, dict):
        keys = " nor ".join(f"metric.{w.dlio_metric} ({w.name})" for w in kinds if w.dlio_metric)
        raise FormatError(path, None, f"not a DLIO summary.json xferscope reads: it has no {keys}")
    first, *others = (w.name for w in kinds)
    what = f"kind {kind!r}" if kind is not None else "no kind, no metric"
    raise FormatError(
        path,
        None,
        f"neither a result of `workload {first} --json` nor DLIO's summary.json, nor of workload "
        f"{', '.join(others)} ({what})",
    )


def saved_workload(files: list[str], kinds: Sequence[WorkloadKind]) -> WorkloadKind:
    """The one workload of the saved ``files`` (SpecError where they are of two: runs of one workload compare)."""
    found = [workload_of(f, kinds) for f in files]
    if any(w is not found[0] for w in found):
        named = ", ".join(f"{os.path.basename(f)} is {w.name}" for f, w in zip(files, found))
        first = found[0].name
        raise SpecError(
            "workload", f"saved runs of one workload compare: {first} runs compare with {first} runs only; {named}"
        )
    return found[0]
