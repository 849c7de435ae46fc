"""Rank 0's live view of a cluster run: every rank's counters, summed from its interval records.

Each interval rank 0 turns the records that arrived into one aggregate
``Sample`` and one per host: bytes and operations summed, latency percentiles
from the merged histogram deltas (never averaged), process CPU summed over the
ranks, system CPU per host. Because records carry deltas, the sums kept per rank
equal that rank's cumulative engine counters once its final record is in.

For elbencho's first-done figure rank 0 needs every rank's totals at the moment
the first worker anywhere finished; each rank keeps its recent (time, bytes,
ops) points so that the value at that moment can be interpolated.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from xferscope.cluster.layout import Layout, RankPlace
from xferscope.cluster.records import RankRecord
from xferscope.engines.base import Sample
from xferscope.records import Run as RunRecord
from xferscope.run.local_run import _latency
from xferscope.stats import Histogram

RECENT_POINTS = 256


def add_sparse(hist: Histogram, sparse: dict) -> None:
    for index, count in sparse.items():
        hist.counts[int(index)] += int(count)


@dataclass
class RankState:
    """What rank 0 knows of one rank."""

    place: RankPlace
    read_bytes: int = 0
    write_bytes: int = 0
    read_ops: int = 0
    write_ops: int = 0
    read_lat_ns: int = 0
    write_lat_ns: int = 0
    hist_read: Histogram = field(default_factory=Histogram)
    hist_write: Histogram = field(default_factory=Histogram)
    lat_min_ns: int = 0
    lat_max_ns: int = 0
    t: float = 0.0
    first: tuple[int, int, int] | None = None  # (t_ns, bytes, ops) of this rank when its first worker finished
    workers_done: int = 0
    worker_bytes: tuple[int, ...] = ()
    error: str | None = None
    status: str = "running"
    cpu: tuple[float, float, float, float] | None = None
    cores: tuple[float, ...] = ()
    gpu: tuple[dict, ...] = ()
    summary: RunRecord | None = None  # the rank's own result, from its final record
    final: bool = False
    lost: bool = False
    last_seen: float = 0.0
    recent: deque = field(default_factory=lambda: deque([(0.0, 0, 0)], maxlen=RECENT_POINTS))
    probes: dict[float, tuple[int, int] | None] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return self.place.rank

    @property
    def host(self) -> str:
        return self.place.host

    @property
    def bytes(self) -> int:
        return self.read_bytes + self.write_bytes

    @property
    def ops(self) -> int:
        return self.read_ops + self.write_ops

    @property
    def first_t(self) -> float | None:
        return self.first[0] / 1e9 if self.first else None

    def absorb(self, rec: RankRecord, now: float) -> None:
        self.read_bytes += rec.read_bytes
        self.write_bytes += rec.write_bytes
        self.read_ops += rec.read_ops
        self.write_ops += rec.write_ops
        self.read_lat_ns += rec.read_lat_ns
        self.write_lat_ns += rec.write_lat_ns
        add_sparse(self.hist_read, rec.hist_read)
        add_sparse(self.hist_write, rec.hist_write)
        if rec.read_ops or rec.write_ops:
            self.lat_min_ns, self.lat_max_ns = rec.lat_min_ns, rec.lat_max_ns
        self.t = max(self.t, rec.t)
        self.first = tuple(rec.first) if rec.first else self.first
        self.workers_done = rec.done
        self.worker_bytes = tuple(rec.worker_bytes) or self.worker_bytes
        self.error = rec.error or self.error
        self.status = rec.status
        self.cpu = rec.cpu or self.cpu
        self.cores = tuple(rec.cores) or self.cores
        self.gpu = tuple(rec.gpu) or self.gpu
        self.last_seen = now
        if rec.status != "running":
            self.final = True
            self.summary = rec.summary
            if self.cpu:  # a finished rank uses no CPU any more
                self.cpu = (0.0, 0.0, self.cpu[2], self.cpu[3])
        self.recent.append((self.t, self.bytes, self.ops))
        for t, value in self.probes.items():
            if value is None:
                self.probes[t] = self._interpolate(t)

    def watch(self, t: float) -> None:
        """Remember this rank's (bytes, ops) at time ``t`` once its records reach it."""
        if t not in self.probes:
            self.probes[t] = self._interpolate(t)

    def value_at(self, t: float) -> tuple[int, int]:
        """(bytes, ops) at ``t``: exact at its own first-done, interpolated elsewhere, the last known as a fallback."""
        if self.first and self.first[0] / 1e9 == t:
            return self.first[1], self.first[2]
        value = self.probes.get(t)
        if value is None:
            value = self._interpolate(t)
        return value if value is not None else (self.bytes, self.ops)

    def _interpolate(self, t: float) -> tuple[int, int] | None:
        pts = self.recent
        if not pts or t > pts[-1][0] or t < pts[0][0]:
            return None
        prev = pts[0]
        for point in pts:
            if point[0] >= t:
                span = point[0] - prev[0]
                f = (t - prev[0]) / span if span > 0 else 1.0
                return (round(prev[1] + f * (point[1] - prev[1])), round(prev[2] + f * (point[2] - prev[2])))
            prev = point
        return None


class IntervalSums:
    """Deltas summed over the records of one interval."""

    def __init__(self) -> None:
        self.read_bytes = self.write_bytes = self.ops = self.lat_ns = 0
        self.hist = Histogram()

    def add(self, rec: RankRecord) -> None:
        self.read_bytes += rec.read_bytes
        self.write_bytes += rec.write_bytes
        self.ops += rec.read_ops + rec.write_ops
        self.lat_ns += rec.read_lat_ns + rec.write_lat_ns
        add_sparse(self.hist, rec.hist_read)
        add_sparse(self.hist, rec.hist_write)


def host_system_cpu(states: Iterable[RankState]) -> tuple[float, float]:
    """System usr/sys percent: one reading per host (all its ranks see the same system), averaged over hosts."""
    per_host: dict[str, tuple[float, float]] = {}
    for st in states:
        if st.cpu and st.host not in per_host:
            per_host[st.host] = (st.cpu[2], st.cpu[3])
    if not per_host:
        return math.nan, math.nan
    n = len(per_host)
    return sum(v[0] for v in per_host.values()) / n, sum(v[1] for v in per_host.values()) / n


def live_sample(t: float, dt: float, sums: IntervalSums, states: list[RankState]) -> Sample:
    """One interval of a group of ranks (all of them, or one host's) as a Sample."""
    dt = max(dt, 1e-9)
    nbytes = sums.read_bytes + sums.write_bytes
    sys_usr, sys_sys = host_system_cpu(states)
    gpu = tuple({**g, "host": st.host} for st in states for g in st.gpu)
    cores = states[0].cores if len({st.host for st in states}) == 1 else ()
    return Sample(
        t=t,
        dt=dt,
        bytes=nbytes,
        ops=sums.ops,
        read_bytes=sums.read_bytes,
        write_bytes=sums.write_bytes,
        throughput_gib_s=nbytes / dt / (1 << 30),
        throughput_mb_s=nbytes / dt / 1e6,
        iops=sums.ops / dt,
        latency_us=_latency(sums.hist, sums.lat_ns, sums.ops),
        cpu_usr_pct=sum(st.cpu[0] for st in states if st.cpu),
        cpu_sys_pct=sum(st.cpu[1] for st in states if st.cpu),
        sys_usr_pct=sys_usr,
        sys_sys_pct=sys_sys,
        per_core_pct=tuple(cores),
        total_bytes=sum(st.bytes for st in states),
        total_ops=sum(st.ops for st in states),
        worker_bytes=tuple(b for st in states for b in st.worker_bytes),
        workers_done=sum(st.workers_done for st in states),
        gpu=gpu,
    )


class LiveAggregate:
    """Rank 0's running sums over all ranks, and the samples made from them."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.states = [RankState(p) for p in layout.places]
        self.hosts = layout.hosts
        self._by_host = {h: [st for st in self.states if st.host == h] for h in self.hosts}
        self.samples: list[Sample] = []
        self.host_samples: dict[str, list[Sample]] = {h: [] for h in self.hosts}
        self._sums = IntervalSums()
        self._host_sums = {h: IntervalSums() for h in self.hosts}
        self._last_t = 0.0

    def states_on(self, host: str) -> list[RankState]:
        return self._by_host[host]

    def add(self, rec: RankRecord, now: float) -> None:
        st = self.states[rec.rank]
        if st.final or st.lost:
            return
        had_first = st.first is not None
        st.absorb(rec, now)
        self._sums.add(rec)
        self._host_sums[st.host].add(rec)
        if st.first is not None and not had_first:
            self._watch_first_done()

    def _watch_first_done(self) -> None:
        """Ask every rank for its totals at the cluster's (and each host's) first-done time."""
        t_all = first_done_time(self.states)
        t_host = {h: first_done_time(states) for h, states in self._by_host.items()}
        for st in self.states:
            for t in (t_all, t_host[st.host]):
                if t is not None:
                    st.watch(t)

    def emit(self, t: float) -> tuple[Sample, dict[str, Sample]]:
        """The aggregate and per-host samples of the interval that ends now (``t`` s since the start)."""
        dt = t - self._last_t
        self._last_t = t
        sample = live_sample(t, dt, self._sums, self.states)
        self.samples.append(sample)
        per_host = {}
        for host in self.hosts:
            s = live_sample(t, dt, self._host_sums[host], self.states_on(host))
            self.host_samples[host].append(s)
            per_host[host] = s
        self._sums = IntervalSums()
        self._host_sums = {h: IntervalSums() for h in self.hosts}
        return sample, per_host

    # ---------------------------------------------------------------- state
    @property
    def settled(self) -> bool:
        """Every rank has sent its final record or was given up on."""
        return all(st.final or st.lost for st in self.states)

    def failed(self) -> list[RankState]:
        return [st for st in self.states if st.error or st.lost]

    def pending(self) -> list[RankState]:
        return [st for st in self.states if not (st.final or st.lost)]

    def give_up(self, st: RankState, why: str) -> None:
        st.lost = True
        st.status = "failed"
        st.error = st.error or why


def first_done_time(states: Iterable[RankState]) -> float | None:
    times = [st.first_t for st in states if st.first_t is not None]
    return min(times) if times else None
