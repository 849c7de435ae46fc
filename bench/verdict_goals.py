"""The verdict rule's goals on the CPU machine: `compare --rounds auto` (its own loop, `run_comparison`) with a
stand-in engine whose throughput follows a known distribution (`xferscope._standin`), many invocations per case.

    python bench/verdict_goals.py [--ratio-spread 0.03] [--invocations 100] [--dir /var/tmp]

--ratio-spread is the sd of a round's paired ratio (log scale) between two runs of the same path. Goals:
  * true ratio 1.00: faster or slower in at most 5 of 100 invocations;
  * true ratio 0.85: slower in 100 of 100;
  * true ratio 0.92: never faster, and one verdict in at least 9 of 10 invocations (rounds added as needed),
    judged as a rate over all the invocations.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import math
import statistics
import tempfile

from xferscope import _standin, runner
from xferscope.commands.compare import run_comparison
from xferscope.rounds import Comparison
from xferscope.spec import RunSpec
from xferscope.verdict import FASTER, MAX_ROUNDS, SLOWER, START_ROUNDS


def invocations(factor: float, run_sd: float, n: int, seed0: int, directory: str) -> list[tuple[str, int]]:
    """(verdict, rounds) of ``n`` invocations of host#1 against host#2 at ``factor``."""
    runner.Run = _standin.StandInRun  # type: ignore[misc]
    out = []
    for i in range(n):
        _standin.configure({"host#1": 1.0, "host#2": factor}, run_sd, paths=2, seed=seed0 + i)
        spec = RunSpec(path="host", block_size=64 << 10, file_size=64 << 10, duration=1.0, directory=directory)
        comp = Comparison([spec, spec], START_ROUNDS, MAX_ROUNDS)
        with contextlib.redirect_stderr(io.StringIO()):
            run_comparison(comp, drop_cache=False, live=False)
        v = comp.verdict(1)
        out.append((v.word if v else "none", comp.rounds))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ratio-spread", type=float, default=0.03)
    ap.add_argument("--invocations", type=int, default=100)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    a = ap.parse_args()
    run_sd = a.ratio_spread / math.sqrt(2)  # two runs' noise make one ratio's
    n = a.invocations
    with tempfile.TemporaryDirectory(prefix="xs-verdict-", dir=a.dir) as d:
        res = {f: invocations(f, run_sd, n, 1000 * k, d) for k, f in enumerate((1.0, 0.85, 0.92))}
    for f, got in res.items():
        words = collections.Counter(w for w, _ in got)
        rounds = [r for _, r in got]
        print(
            f"# ratio {f:.2f}, spread {a.ratio_spread:.3f}: {dict(words)}; rounds median {statistics.median(rounds):g}"
            f" (mean {statistics.mean(rounds):.1f}, max {max(rounds)})"
        )
    aa = sum(w in (FASTER, SLOWER) for w, _ in res[1.0])
    print(f"{'met' if aa <= 5 * n / 100 else 'not met'}  ratio 1.00: faster or slower in {aa} of {n}")
    slow = sum(w == SLOWER for w, _ in res[0.85])
    print(f"{'met' if slow == n else 'not met'}  ratio 0.85: slower in {slow} of {n}")
    words92 = [w for w, _ in res[0.92]]
    tens = [collections.Counter(words92[i : i + 10]).most_common(1)[0][1] for i in range(0, len(words92) - 9, 10)]
    faster = words92.count(FASTER)
    word, agree = collections.Counter(words92).most_common(1)[0]
    rate = agree / n
    # "the same verdict in at least 9 of 10 invocations": the rate, measured over all n; a single group of ten
    # drawn at that rate has 9 or 10 with the probability shown
    p_group = sum(math.comb(10, k) * rate**k * (1 - rate) ** (10 - k) for k in (9, 10))
    ok = faster == 0 and rate >= 0.9
    print(
        f"{'met' if ok else 'not met'}  ratio 0.92: faster in {faster} of {n}; the commonest verdict {word} in "
        f"{agree} of {n} ({rate:.0%}, against 90%); each group of 10: {tens} (at this rate a group of ten agrees "
        f"9 or 10 times with probability {p_group:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
