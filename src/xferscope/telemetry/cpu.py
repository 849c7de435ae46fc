"""CPU use of this process and of the system (per core), between two readings."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class CpuReading:
    """CPU percentages over an interval. Process figures are percent of one core (top's convention,
    can exceed 100 with several threads); system figures are percent of all cores."""

    proc_usr_pct: float
    proc_sys_pct: float
    sys_usr_pct: float
    sys_sys_pct: float
    sys_iowait_pct: float
    per_core_busy_pct: tuple[float, ...]
    proc_cpu_seconds: float


class CpuMeter:
    """Reads process and system CPU times; ``read()`` gives the use since the previous call."""

    def __init__(self) -> None:
        self._proc = psutil.Process(os.getpid())
        self.ncpu = psutil.cpu_count() or 1
        self._last = self._now()
        self._first = self._last

    def _now(self):
        return (time.monotonic(), self._proc.cpu_times(), psutil.cpu_times(percpu=True))

    @staticmethod
    def _busy(t) -> float:
        return (
            t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)
        )

    @classmethod
    def _total(cls, t) -> float:
        return cls._busy(t) + t.idle + getattr(t, "iowait", 0.0)

    def _between(self, a, b) -> CpuReading:
        (t0, p0, c0), (t1, p1, c1) = a, b
        wall = max(t1 - t0, 1e-9)
        usr = p1.user + getattr(p1, "children_user", 0) - p0.user - getattr(p0, "children_user", 0)
        sys_ = p1.system + getattr(p1, "children_system", 0) - p0.system - getattr(p0, "children_system", 0)
        cores, su, ss, sio, stot = [], 0.0, 0.0, 0.0, 0.0
        for x, y in zip(c0, c1):
            total = self._total(y) - self._total(x)
            busy = self._busy(y) - self._busy(x)
            cores.append(100.0 * busy / total if total > 0 else 0.0)
            su += (y.user + y.nice) - (x.user + x.nice)
            ss += (y.system + getattr(y, "irq", 0) + getattr(y, "softirq", 0)) - (
                x.system + getattr(x, "irq", 0) + getattr(x, "softirq", 0)
            )
            sio += getattr(y, "iowait", 0.0) - getattr(x, "iowait", 0.0)
            stot += total
        stot = stot or 1e-9
        return CpuReading(
            proc_usr_pct=100.0 * usr / wall,
            proc_sys_pct=100.0 * sys_ / wall,
            sys_usr_pct=100.0 * su / stot,
            sys_sys_pct=100.0 * ss / stot,
            sys_iowait_pct=100.0 * sio / stot,
            per_core_busy_pct=tuple(round(c, 1) for c in cores),
            proc_cpu_seconds=usr + sys_,
        )

    def read(self) -> CpuReading:
        now = self._now()
        reading = self._between(self._last, now)
        self._last = now
        return reading

    def mark(self) -> None:
        """Start the whole-run window here (the timed region's start)."""
        self._first = self._last = self._now()

    def since_mark(self) -> CpuReading:
        return self._between(self._first, self._now())


class ThreadCpuMeter:
    """User and system CPU of a set of threads of this process (the engine's workers), from
    /proc/self/task/TID/stat. Threads that have exited keep their last reading."""

    def __init__(self, tids: list[int]) -> None:
        self.tids = list(tids)
        self._tick = 1.0 / os.sysconf("SC_CLK_TCK")
        self._seen: dict[int, tuple[float, float]] = {}
        self._last = (time.monotonic(), self._total())

    def _read(self, tid: int) -> tuple[float, float] | None:
        try:
            with open(f"/proc/self/task/{tid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            return int(fields[11]) * self._tick, int(fields[12]) * self._tick
        except (OSError, IndexError, ValueError):
            return None

    def _total(self) -> tuple[float, float]:
        usr = sys_ = 0.0
        for tid in self.tids:
            now = self._read(tid)
            if now is not None:
                self._seen[tid] = now
            u, s = self._seen.get(tid, (0.0, 0.0))
            usr += u
            sys_ += s
        return usr, sys_

    def read(self) -> tuple[float, float]:
        """(usr %, sys %) of one core since the previous call."""
        t0, (u0, s0) = self._last
        t1, (u1, s1) = time.monotonic(), self._total()
        self._last = (t1, (u1, s1))
        wall = max(t1 - t0, 1e-9)
        return 100.0 * (u1 - u0) / wall, 100.0 * (s1 - s0) / wall
