"""A CSV snapshot of the console's runs: the time series (also of a run still going) and the summaries
of the runs that ended."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterable

from xferscope.app.session import RunRecord
from xferscope.engines.base import RunResult
from xferscope.errors import NotWritten, XferscopeError
from xferscope.export import write_series_csv, write_summary_csv


def series_so_far(record: RunRecord) -> RunResult:
    """A run still going, for the series CSV: its samples so far and the totals of the last one.

    What only exists at the end (the whole-run histogram, CPU since the start, per-worker finish
    times) is absent (NaN or empty), and the status says "running"; it never goes into a summary.
    """
    samples = list(record.history)
    last = samples[-1]
    return RunResult.totals_only(
        record.spec,
        "running",
        bytes=last.total_bytes,
        ops=last.total_ops,
        read_bytes=sum(s.read_bytes for s in samples),
        write_bytes=sum(s.write_bytes for s in samples),
        seconds=last.t,
        labels=list(record.labels),
        samples=samples,
    )


def export_dir(preferred: str | None = None) -> str:
    """The directory given, else the current one, else the temporary directory: the first writable."""
    try:
        here = os.getcwd()
    except OSError:  # the current directory was removed
        here = None
    for cand in (preferred, here, tempfile.gettempdir()):
        if cand and os.path.isdir(cand) and os.access(cand, os.W_OK):
            return cand
    raise XferscopeError("no writable directory for the snapshot")


def _free_name(directory: str, stem: str) -> str:
    n = 1
    name = stem
    while os.path.exists(os.path.join(directory, f"{name}-series.csv")):
        n += 1
        name = f"{stem}-{n}"
    return os.path.join(directory, name)


def write_snapshot(directory: str, records: Iterable[RunRecord], loaded: Iterable[RunResult] = ()) -> list[str]:
    """Write ``…-series.csv`` and ``…-summary.csv``; returns their paths. XferscopeError when nothing was
    measured; NotWritten (naming the file, and the one written before it) when a file cannot be written."""
    records = list(records)
    finished = [r.result for r in records if r.result is not None]
    running = [series_so_far(r) for r in records if r.result is None and r.history]
    series = [r for r in finished + running if r.samples]
    summaries = finished + list(loaded)
    if not series and not summaries:
        raise XferscopeError("nothing measured yet: start a run (r) or open saved results first")
    base = _free_name(directory, "xferscope-" + time.strftime("%Y%m%d-%H%M%S"))
    paths: list[str] = []
    try:
        if series:
            write_series_csv(base + "-series.csv", series)
            paths.append(base + "-series.csv")
        if summaries:
            write_summary_csv(base + "-summary.csv", summaries)
            paths.append(base + "-summary.csv")
    except NotWritten as exc:
        if paths:
            raise NotWritten(exc.path, f"{exc.reason}; {paths[0]} was written") from None
        raise
    return paths
