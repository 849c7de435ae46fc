"""Latency histograms (the native core's log-linear buckets) and statistics over repetitions."""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Iterable, Mapping

HIST_SUB = 64
HIST_NBUCKETS = 2 * HIST_SUB + HIST_SUB * 34
PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def bucket_low(index: int) -> int:
    """Smallest value (ns) that falls in bucket ``index``; mirrors hist_bucket_low() in C."""
    if index < 2 * HIST_SUB:
        return index
    shift = index // HIST_SUB - 1
    return (index % HIST_SUB + HIST_SUB) << shift


def bucket_width(index: int) -> int:
    return 1 if index < 2 * HIST_SUB else 1 << (index // HIST_SUB - 1)


def bucket_index(value: int) -> int:
    """Bucket of a value (ns); mirrors hist_index() in C."""
    if value < 2 * HIST_SUB:
        return max(0, int(value))
    value = min(int(value), (1 << 40) - 1)
    shift = value.bit_length() - 1 - 6
    return HIST_SUB * shift + (value >> shift)


class Histogram:
    """Counts per bucket. Cheap to subtract (interval = now - before) and to merge (workers, hosts)."""

    __slots__ = ("counts",)

    def __init__(self, counts: array | None = None):
        self.counts = counts if counts is not None else array("Q", bytes(8 * HIST_NBUCKETS))

    @classmethod
    def from_bytes(cls, raw: bytes) -> Histogram:
        counts = array("Q")
        counts.frombytes(raw)
        return cls(counts)

    @classmethod
    def from_sparse(cls, sparse: Mapping[int | str, int]) -> Histogram:
        h = cls()
        for index, count in sparse.items():
            h.counts[int(index)] += int(count)
        return h

    def to_sparse(self) -> dict[int, int]:
        return {i: c for i, c in enumerate(self.counts) if c}

    def __sub__(self, other: Histogram) -> Histogram:
        return Histogram(array("Q", (a - b for a, b in zip(self.counts, other.counts))))

    def __add__(self, other: Histogram) -> Histogram:
        return Histogram(array("Q", (a + b for a, b in zip(self.counts, other.counts))))

    @property
    def count(self) -> int:
        return sum(self.counts)

    def percentiles(self, ps: Iterable[float] = PERCENTILES) -> dict[float, float]:
        """Value (ns) at each percentile, the middle of the bucket holding that rank; NaN when empty."""
        ps = sorted(ps)
        total = self.count
        out = dict.fromkeys(ps, math.nan)
        if not total:
            return out
        targets = [(p, max(1, math.ceil(total * p / 100.0))) for p in ps]
        seen, t = 0, 0
        for index, c in enumerate(self.counts):
            if not c:
                continue
            seen += c
            while t < len(targets) and seen >= targets[t][1]:
                out[targets[t][0]] = bucket_low(index) + (bucket_width(index) - 1) / 2.0
                t += 1
            if t == len(targets):
                break
        return out

    def min(self) -> float:
        for index, c in enumerate(self.counts):
            if c:
                return float(bucket_low(index))
        return math.nan

    def max(self) -> float:
        for index in range(len(self.counts) - 1, -1, -1):
            if self.counts[index]:
                return float(bucket_low(index) + bucket_width(index) - 1)
        return math.nan


def summarize(values: Iterable[float]) -> dict[str, float]:
    """Median, standard deviation, min and max over repetitions (NaN-free input expected)."""
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return {"median": math.nan, "stdev": math.nan, "min": math.nan, "max": math.nan, "n": 0}
    return {
        "median": statistics.median(vals),
        "stdev": statistics.stdev(vals) if len(vals) > 1 else 0.0,
        "min": min(vals),
        "max": max(vals),
        "n": len(vals),
    }


def median_of(values: Iterable[float | None]) -> float | None:
    """The median of the finite values given (None, NaN and infinities left out); None where there is none."""
    known = [float(v) for v in values if v is not None and math.isfinite(v)]
    return statistics.median(known) if known else None
