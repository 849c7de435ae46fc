"""Accelerator utilisation to DLIO's definition, and the figures that go with it.

DLIO (``utils/statscounter.py``): AU = total compute time / total running time, the first step left out of
both. Its running time is the block's wall time less the first step's load and compute, which is the time
from the end of the first step to the end of the last. Per accelerator; the run's AU is their mean, as DLIO
averages its ranks, and it passes when that mean reaches the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One training step of one accelerator, in seconds from the start of the run."""

    wait_s: float  # from asking for the batch to having it (the I/O wait)
    compute_s: float  # the emulated computation
    end_s: float  # when the step ended
    samples: int
    bytes: int


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), interpolated between the order statistics; NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class Utilisation:
    steps: int  # every step, the first included
    counted_steps: int  # the steps AU counts (the first left out)
    span_s: float  # end of the first step to end of the last
    compute_s: float  # the counted steps' compute
    au: float  # share, 0-1; NaN with fewer than 2 steps
    samples: int  # of the counted steps
    bytes: int  # of the counted steps
    io_wait_p50_s: float
    io_wait_p99_s: float
    first_batch_s: float  # the first step's wait: the time to the first batch

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.span_s if self.span_s > 0 else math.nan

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.span_s if self.span_s > 0 else math.nan


def utilisation(steps: Sequence[Step]) -> Utilisation:
    first = steps[0].wait_s if steps else math.nan
    counted = list(steps[1:])
    if not counted:
        return Utilisation(len(steps), 0, 0.0, 0.0, math.nan, 0, 0, math.nan, math.nan, first)
    span = steps[-1].end_s - steps[0].end_s
    compute = sum(s.compute_s for s in counted)
    waits = [s.wait_s for s in counted]
    return Utilisation(
        steps=len(steps),
        counted_steps=len(counted),
        span_s=span,
        compute_s=compute,
        au=compute / span if span > 0 else math.nan,
        samples=sum(s.samples for s in counted),
        bytes=sum(s.bytes for s in counted),
        io_wait_p50_s=percentile(waits, 50),
        io_wait_p99_s=percentile(waits, 99),
        first_batch_s=first,
    )


def mean_au(values: Sequence[float]) -> float:
    known = [v for v in values if not math.isnan(v)]
    return sum(known) / len(known) if known and len(known) == len(values) else math.nan
