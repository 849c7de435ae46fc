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

import msgspec

from xferscope.engines.base import Sample, Snapshot
from xferscope.records import Run as RunRecord
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


class RankRecord(msgspec.Struct, kw_only=True):
    """One rank's interval: counter deltas since its last record, cumulative facts, its latest readings."""

    rank: int
    seq: int  # -1: the final record of a rank whose engine broke
    t: float  # seconds into its run
    read_bytes: int
    write_bytes: int
    read_ops: int
    write_ops: int
    read_lat_ns: int  # latency sums
    write_lat_ns: int
    hist_read: dict[int, int]  # sparse bucket deltas
    hist_write: dict[int, int]
    lat_min_ns: int
    lat_max_ns: int
    first: tuple[int, int, int] | None  # the first worker done: (ns, bytes, ops) of the rank then
    done: int  # workers done
    worker_bytes: tuple[int, ...]
    error: str | None
    cpu: tuple[float, float, float, float] | None  # process user, system; host user, system (percent)
    cores: tuple[float, ...]  # the host's per-core percent (one rank per host sends them)
    gpu: tuple[Any, ...]
    status: str  # running, ok, interrupted, failed
    summary: RunRecord | None = None  # the final record's: the rank's own result


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

    def make(self, snap: Snapshot, *, status: str = "running", summary: RunRecord | None = None) -> RankRecord:
        prev = self._prev
        now_sums, before = _sums(snap), _sums(prev)
        d = [a - b for a, b in zip(now_sums, before)]
        s = self.latest
        rec = RankRecord(
            rank=self.rank,
            seq=self._seq,
            t=snap.t_ns / 1e9,
            read_bytes=d[0],
            write_bytes=d[1],
            read_ops=d[2],
            write_ops=d[3],
            read_lat_ns=d[4],
            write_lat_ns=d[5],
            hist_read=_sparse_delta(snap.hist_read, prev.hist_read if prev else None),
            hist_write=_sparse_delta(snap.hist_write, prev.hist_write if prev else None),
            lat_min_ns=snap.lat_min_ns,
            lat_max_ns=snap.lat_max_ns,
            first=snap.first_done,
            done=snap.done,
            worker_bytes=tuple(w.bytes for w in snap.workers),
            error=snap.error[0] if snap.error else None,
            cpu=(s.cpu_usr_pct, s.cpu_sys_pct, s.sys_usr_pct, s.sys_sys_pct) if s else None,
            cores=tuple(s.per_core_pct) if s and self.with_cores else (),
            gpu=tuple(s.gpu) if s else (),
            status=status,
            summary=summary,
        )
        self._prev = snap
        self._seq += 1
        return rec


def failure_record(rank: int, message: str, t: float = 0.0) -> RankRecord:
    """The final record of a rank that could not produce a snapshot (its engine broke)."""
    return RankRecord(
        rank=rank,
        seq=-1,
        t=t,
        read_bytes=0,
        write_bytes=0,
        read_ops=0,
        write_ops=0,
        read_lat_ns=0,
        write_lat_ns=0,
        hist_read={},
        hist_write={},
        lat_min_ns=0,
        lat_max_ns=0,
        first=None,
        done=0,
        worker_bytes=(),
        error=message,
        cpu=None,
        cores=(),
        gpu=(),
        status="failed",
    )
