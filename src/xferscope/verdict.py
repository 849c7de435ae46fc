"""Whether one path beats another, from paired rounds: faster, slower or within noise.

A comparison runs in rounds; each round runs every path once (order rotated), so ``baseline[i]`` and
``other[i]`` were measured minutes apart on the same machine state. Their ratio cancels what the machine did
between rounds (a neighbour's load, a cache filling up); what is left is the noise between two runs in a row.

The rule, chosen for few rounds (3-5) on noisy shared disks:

* **faster** when the paired ratio of *every* round is above ``1 + MARGIN``,
* **slower** when every one is below ``1 - MARGIN``,
* **within noise** otherwise; one round gives no verdict at all.

Why not a bootstrap interval of the median: with 3 rounds there are only 10 distinct resamples and the
interval is the min-max range anyway, so "every ratio beyond the margin" is the same test, stated plainly.
Why every round and a margin: if the two paths are the same (A/A) and a run's ratio lands beyond the margin on
one side with probability p (p <= 1/2), all n rounds do so with probability 2 p**n: with a run-to-run noise of
about 6% (p = 0.2) that is 1.6% for 3 rounds and 0.06% for 5. Rotating the order removes a systematic
first-run bias, the usual cause of one-sided A/A ratios. A margin of 5% keeps differences too small to act on out of the verdicts.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MARGIN = 0.05
FASTER, SLOWER, WITHIN_NOISE, SINGLE_PASS = "faster", "slower", "within noise", "single pass: no verdict"
WORDS = (FASTER, SLOWER, WITHIN_NOISE, SINGLE_PASS)

RULE = (
    f"verdict: faster/slower only if every round's paired ratio (path/baseline, same round) is beyond "
    f"1 ± {MARGIN:.0%}; else within noise; 1 round: no verdict"
)


@dataclass(frozen=True)
class Verdict:
    word: str  # one of WORDS
    ratio: float  # median of the paired per-round ratios other/baseline
    low: float  # min of the paired ratios
    high: float  # max of the paired ratios
    rounds: int

    @property
    def decided(self) -> bool:
        """True for faster or slower."""
        return self.word in (FASTER, SLOWER)

    def spread(self) -> str:
        """The ratio with its range, e.g. ``1.12 (1.07-1.18)``; a single pass shows the one ratio."""
        if self.rounds < 2:
            return f"{self.ratio:.2f}"
        return f"{self.ratio:.2f} ({self.low:.2f}-{self.high:.2f})"

    def as_dict(self) -> dict:
        return {
            "verdict": self.word,
            "ratio": self.ratio,
            "ratio_min": self.low,
            "ratio_max": self.high,
            "rounds": self.rounds,
        }


def _figures(name: str, values: Sequence[float]) -> list[float]:
    out = [float(v) for v in values]
    for v in out:
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name}: every round needs a positive figure, got {v!r}")
    return out


def paired_ratios(baseline: Sequence[float], other: Sequence[float]) -> list[float]:
    """other[i] / baseline[i] for each round."""
    base, oth = _figures("baseline", baseline), _figures("other", other)
    if len(base) != len(oth):
        raise ValueError(f"paired rounds differ in number: {len(base)} against {len(oth)}")
    if not base:
        raise ValueError("no rounds to compare")
    return [o / b for b, o in zip(base, oth)]


def paired_verdict(baseline: Sequence[float], other: Sequence[float]) -> Verdict:
    """The verdict on ``other`` against ``baseline``, measured round by round (higher is better)."""
    ratios = paired_ratios(baseline, other)
    low, high = min(ratios), max(ratios)
    return Verdict(
        word=_word(len(ratios), low, high), ratio=statistics.median(ratios), low=low, high=high, rounds=len(ratios)
    )


def _word(rounds: int, low: float, high: float) -> str:
    """The rule itself: every ratio beyond the margin on one side, with two rounds (repetitions) or more."""
    if rounds < 2:
        return SINGLE_PASS
    if low > 1 + MARGIN:
        return FASTER
    if high < 1 - MARGIN:
        return SLOWER
    return WITHIN_NOISE


def drift(baseline: Sequence[float]) -> str | None:
    """A warning when the baseline's first and last rounds differ by more than the margin the rule allows."""
    base = _figures("baseline", baseline)
    if len(base) < 2:
        return None
    change = base[-1] / base[0] - 1
    if abs(change) <= MARGIN:
        return None
    return (
        f"drift: the baseline's last round is {abs(change):.0%} {'above' if change > 0 else 'below'} its first "
        f"(beyond the {MARGIN:.0%} the rule allows); the machine changed during the comparison"
    )


RULE_REPEATED = (
    f"verdict: faster/slower only if every repetition's ratio to every repetition it is compared "
    f"with is beyond 1 ± {MARGIN:.0%}; else within noise; 1 repetition on a side: no verdict"
)


def repeated_verdict(before: Sequence[float], after: Sequence[float]) -> Verdict:
    """The verdict on ``after`` against ``before`` when their figures were not measured in the same rounds (a
    sweep against an earlier file, grid points run one after another): the same margin over every ratio of
    an ``after`` figure to a ``before`` figure, i.e. ``min(after)/max(before)`` and ``max(after)/min(before)``.
    ``ratio`` is the ratio of the medians; ``rounds`` the fewer repetitions of the two sides."""
    old, new = _figures("before", before), _figures("after", after)
    if not old or not new:
        raise ValueError("no figures to compare")
    ratio = statistics.median(new) / statistics.median(old)
    low, high = min(new) / max(old), max(new) / min(old)
    n = min(len(old), len(new))
    return Verdict(word=_word(n, low, high), ratio=ratio, low=low, high=high, rounds=n)
