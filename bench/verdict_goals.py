"""The verdict rule's goals on the CPU machine: `compare --rounds auto` (its own loop, `run_comparison`) with a
stand-in engine whose throughput follows a known distribution (tests/standin_runs.py), many invocations per case.

    python bench/verdict_goals.py [--spreads 0.03,0.065] [--triples 100] [--margin 0.05] [--dir /var/tmp]

A spread is the sd of a round's paired ratio (log scale) between two runs of the same path. Goals (issue 37):
  * for true ratios from 0.90 to 1.10 in steps of 0.01, at each spread, 100 triples of invocations: at most 5% of
    the triples hold two different decided verdicts (faster, slower, same) for the path;
  * true ratio 1.00 (A/A): faster or slower in at most 5 of 100 invocations, at each spread;
  * at a spread of 3%: a true 0.85 slower in 100 of 100, a true 0.90 slower in at least 95 of 100.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import math
import os
import statistics
import sys
import tempfile

from xferscope.commands.compare import run_comparison
from xferscope.compare.rounds import RoundsComparison
from xferscope.compare.verdict import FASTER, MARGIN, MAX_ROUNDS, SAME, SLOWER, START_ROUNDS
from xferscope.run import runner
from xferscope.spec import RunSpec

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import standin_runs as _standin


def invocations(
    factor: float, run_sd: float, n: int, seed0: int, directory: str, margin: float = MARGIN
) -> list[tuple[str, int]]:
    """(verdict, rounds) of ``n`` invocations of host#1 against host#2 at ``factor``."""
    runner.EngineRun = _standin.StandInRun  # type: ignore[misc]
    out = []
    for i in range(n):
        _standin.configure({"host#1": 1.0, "host#2": factor}, run_sd, paths=2, seed=seed0 + i)
        spec = RunSpec(path="host", block_size=64 << 10, file_size=64 << 10, duration=1.0, directory=directory)
        comp = RoundsComparison([spec, spec], START_ROUNDS, MAX_ROUNDS, margin)
        with contextlib.redirect_stderr(io.StringIO()):
            run_comparison(comp, drop_cache=False, live=False)
        v = comp.verdict(1)
        out.append((v.word if v else "none", comp.rounds))
    return out


DECIDED = (FASTER, SLOWER, SAME)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spreads", default="0.03,0.065", help="comma list of a round's ratio spread (sd)")
    ap.add_argument("--triples", type=int, default=100)
    ap.add_argument("--margin", type=float, default=MARGIN)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    a = ap.parse_args()
    n = a.triples
    failed = 0
    with tempfile.TemporaryDirectory(prefix="xs-verdict-", dir=a.dir) as d:
        for spread in (float(x) for x in a.spreads.split(",")):
            run_sd = spread / math.sqrt(2)  # two runs' noise make one ratio's
            worst, split_total, cases = 0, 0, 0
            for k, percent in enumerate(range(90, 111)):
                factor = percent / 100
                got = invocations(factor, run_sd, 3 * n, 1000 * k + int(spread * 1e4), d, a.margin)
                words = [w for w, _ in got]
                triples = [words[i : i + 3] for i in range(0, 3 * n, 3)]
                split = sum(len({w for w in t if w in DECIDED}) > 1 for t in triples)
                worst, split_total, cases = max(worst, split), split_total + split, cases + 1
                counts = collections.Counter(words)
                rounds = statistics.median(r for _, r in got)
                print(
                    f"# spread {spread:.3f}, ratio {factor:.2f}: {dict(counts)}; two decided verdicts in {split} "
                    f"of {n} triples; rounds median {rounds:g}"
                )
                if percent == 100:
                    aa = sum(w in (FASTER, SLOWER) for w in words[:n])
                    met = aa <= 5 * n / 100
                    failed += not met
                    print(f"{'met' if met else 'not met'}  spread {spread:.3f}, A/A: faster or slower in {aa} of {n}")
            met = worst <= 5 * n / 100
            failed += not met
            print(
                f"{'met' if met else 'not met'}  spread {spread:.3f}: two different decided verdicts in at most "
                f"{worst} of {n} triples at any true ratio 0.90-1.10 ({split_total} of {cases * n} in all)"
            )
            if spread <= 0.03:
                for factor, need in ((0.85, n), (0.90, 95 * n // 100)):
                    got = invocations(factor, run_sd, n, 77_000 + int(factor * 100), d, a.margin)
                    slow = sum(w == SLOWER for w, _ in got)
                    met = slow >= need
                    failed += not met
                    print(
                        f"{'met' if met else 'not met'}  spread {spread:.3f}, ratio {factor:.2f}: slower in {slow} of {n}"
                    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
