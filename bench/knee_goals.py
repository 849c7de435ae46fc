"""The knee search's goals on a stand-in storage with a known curve (``ConcurrencyCurve`` of tests/standin_runs.py):
throughput in proportion to the I/Os in flight up to the knee, then flat, each run off by a uniform ±15%.

    python bench/knee_goals.py [--noise 0.15] [--searches 20]

Goals (issue 37): over 20 searches of each curve, the knee within one doubling of the true knee (the least
concurrency within 5% of the plateau) in at least 18; a flat curve called flat from the start in at least 18;
and a curve like the 2-CPU machine's (flat from 32 in flight, 16 workers x qd 64 allowed) never answered with
1024 in flight.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from xferscope.saturate.search import KneeSearch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from standin_runs import ConcurrencyCurve

#: (name, knee in flight, the search's limits)
CURVES = [
    ("knee at 4 in flight, io_uring (16 workers x qd 64)", 4, {"max_workers": 16, "max_qd": 64}),
    ("knee at 32 in flight, io_uring (the 2-CPU machine's curve)", 32, {"max_workers": 16, "max_qd": 64}),
    ("knee at 128 in flight, io_uring", 128, {"max_workers": 16, "max_qd": 64}),
    ("knee at 8 workers, no queue (64 workers)", 8, {"max_workers": 64}),
]
FLAT = [
    ("flat, io_uring (16 workers x qd 64)", {"max_workers": 16, "max_qd": 64}),
    ("flat, no queue (16 workers)", {"max_workers": 16}),
]


def searches(knee: float, limits: dict, noise: float, n: int):
    """(the search's answer, the curve) for ``n`` seeds."""
    out = []
    for seed in range(n):
        curve = ConcurrencyCurve(knee, noise=noise, seed=seed)
        out.append((KneeSearch(curve, **limits).run(), curve))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--noise", type=float, default=0.15, help="each run off by a uniform ± this share")
    ap.add_argument("--searches", type=int, default=20)
    a = ap.parse_args()
    n, need = a.searches, -(-a.searches * 9 // 10)
    failed = 0
    for name, knee, limits in CURVES:
        got = searches(knee, limits, a.noise, n)
        ok = sum(curve.within_one_doubling(found.knee.concurrency) for found, curve in got)
        knees = sorted(found.knee.concurrency for found, _ in got)
        runs = statistics.median(curve.runs for _, curve in got)
        most = max(knees)
        line = f"{name}: within one doubling of {got[0][1].true_knee:g} in {ok} of {n}; knees {knees}; runs {runs:g}"
        met = ok >= need and (knee != 32 or most < 1024)
        failed += not met
        print(f"{'met' if met else 'not met'}  {line}")
    for name, limits in FLAT:
        got = searches(1, limits, a.noise, n)
        flat = sum(bool(found.flat and found.flat.from_first) for found, _ in got)
        example = got[0][0].flat.text("GiB/s") if got[0][0].flat else "-"
        met = flat >= need
        failed += not met
        print(f"{'met' if met else 'not met'}  {name}: called flat from the start in {flat} of {n} ({example})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
