"""What a rank tells rank 0 each interval: a small record of what its engine did since the last one.

A record carries counter *deltas* (bytes, operations, latency sums, and the
latency histograms as sparse bucket deltas), so that rank 0's sums over all
records equal the rank's cumulative counters exactly; plus cumulative facts
(time, first-done point, per-worker bytes, error) and the rank's latest CPU and
GPU readings. The last record of a rank is marked final and carries the rank's
own result summary.
"""

from __future__ import annotations

from typing import Any

from xferscope.engines.base import Sample, Snapshot
from xferscope.stats import Histogram


def _sums(snap: Snapshot | None) -> tuple[int, int, int, int, int, int]:
    if snap is None:
        return (0, 0, 0, 0, 0, 0)
    rb = wb = ro = wo = rl = wl = 0
    for w in snap.workers:
        rb += w.read_bytes
        wb += w.write_bytes
        ro += w.read_ops
        wo += w.write_ops
        rl += w.read_lat_sum_ns
        wl += w.write_lat_sum_ns
    return rb, wb, ro, wo, rl, wl


def _sparse_delta(now: Histogram, before: Histogram | None) -> dict[int, int]:
    if before is None:
        return now.to_sparse()
    return {i: c - b for i, (c, b) in enumerate(zip(now.counts, before.counts)) if c != b}


class RecordMaker:
    """Turns successive engine snapshots of one rank into interval records."""

    def __init__(self, rank: int, *, with_cores: bool):
        self.rank = rank
        self.with_cores = with_cores  # the host's per-core figures: sent by one rank per host
        self.latest: Sample | None = None
        self._prev: Snapshot | None = None
        self._seq = 0

    def on_sample(self, sample: Sample | None) -> None:
        """Run.subscribe callback (sampler thread): keep the latest reading; never blocks."""
        if sample is not None:
            self.latest = sample

    def make(self, snap: Snapshot, *, status: str = "running", summary: dict | None = None) -> dict[str, Any]:
        prev = self._prev
        now_sums, before = _sums(snap), _sums(prev)
        d = [a - b for a, b in zip(now_sums, before)]
        s = self.latest
        rec: dict[str, Any] = {
            "rank": self.rank,
            "seq": self._seq,
            "t": snap.t_ns / 1e9,
            "rb": d[0],
            "wb": d[1],
            "ro": d[2],
            "wo": d[3],
            "rl": d[4],
            "wl": d[5],
            "hr": _sparse_delta(snap.hist_read, prev.hist_read if prev else None),
            "hw": _sparse_delta(snap.hist_write, prev.hist_write if prev else None),
            "lat_min": snap.lat_min_ns,
            "lat_max": snap.lat_max_ns,
            "first": snap.first_done,
            "done": snap.done,
            "wbytes": tuple(w.bytes for w in snap.workers),
            "error": snap.error[0] if snap.error else None,
            "cpu": (s.cpu_usr_pct, s.cpu_sys_pct, s.sys_usr_pct, s.sys_sys_pct) if s else None,
            "cores": tuple(s.per_core_pct) if s and self.with_cores else (),
            "gpu": tuple(s.gpu) if s else (),
            "status": status,
        }
        if summary is not None:
            rec["summary"] = summary
        self._prev = snap
        self._seq += 1
        return rec


def failure_record(rank: int, message: str, t: float = 0.0) -> dict[str, Any]:
    """The final record of a rank that could not produce a snapshot (its engine broke)."""
    return {
        "rank": rank,
        "seq": -1,
        "t": t,
        "rb": 0,
        "wb": 0,
        "ro": 0,
        "wo": 0,
        "rl": 0,
        "wl": 0,
        "hr": {},
        "hw": {},
        "lat_min": 0,
        "lat_max": 0,
        "first": None,
        "done": 0,
        "wbytes": (),
        "error": message,
        "cpu": None,
        "cores": (),
        "gpu": (),
        "status": "failed",
    }
