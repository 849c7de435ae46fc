"""Whether one path beats another, from paired rounds: faster, slower or within noise.

A comparison runs in rounds; each round runs every path once (order rotated), so ``baseline[i]`` and
``other[i]`` were measured minutes apart on the same machine state. Their ratio cancels what the machine did
between rounds (a neighbour's load, a cache filling up); what is left is the noise between two runs in a row.

The rule, chosen for few rounds (3-5) on noisy shared disks:

* **faster** when the paired ratio of *every* round is above ``1 + margin``,
* **slower** when every one is below ``1 - margin``,
* **within noise** otherwise; one round gives no verdict at all;
* the margin narrows as the rounds grow: ``30% / rounds``, never under 5% (2 rounds: 15%, 3: 10%, 4: 7.5%,
  5: 6%, 6 or more: 5%).

Why not a bootstrap interval of the median: with 3 rounds there are only 10 distinct resamples and the
interval is the min-max range anyway, so "every ratio beyond the margin" is the same test, stated plainly.

Why every round, and why this margin: if the two paths are the same (A/A) and a round's ratio lands beyond the
margin on one side with probability p, all n rounds do so with probability 2 p**n. On shared virtual disks a
round's A/A ratio has a spread of about 6-7% (sd; single rounds from 0.89 to 1.19) with the host buffers on 2 MiB
pages, and 16% on 4 KiB pages, where the pages a run gets set its speed. A fixed 5% margin (p = 0.24 at 7%) gives
2.8% false verdicts at 3 rounds, and more where the rounds of one comparison are not independent: on 4 KiB pages 8
of 48 A/A comparisons of 3 rounds said faster or slower. A margin of 30% / rounds keeps 2 p**n near 0.1% at every
round count from 2 to 6 under that spread (p = 0.016, 0.077, 0.14, 0.20, 0.24), so that a verdict means the same
whatever the rounds; more rounds resolve smaller differences. The floor of 5% keeps differences too small to act on
out of the verdicts. Rotating the order removes a systematic first-run bias, the usual cause of one-sided A/A
ratios.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: the narrowest margin, reached at 6 rounds: a difference under 5% is not one to act on
MARGIN = 0.05
#: the margin with n rounds is this over n (never under MARGIN)
MARGIN_TIMES_ROUNDS = 0.30
FASTER, SLOWER, WITHIN_NOISE, SINGLE_PASS = "faster", "slower", "within noise", "single pass: no verdict"
WORDS = (FASTER, SLOWER, WITHIN_NOISE, SINGLE_PASS)


def margin_for(rounds: int) -> float:
    """The margin of the rule with this many rounds (repetitions): 30% / rounds, never under 5%."""
    return max(MARGIN, round(MARGIN_TIMES_ROUNDS / max(rounds, 1), 6))


def margins_text(word: str) -> str:
    """The rule's margins in words, for rounds or repetitions (``word``)."""
    return (
        f"1 ± {MARGIN_TIMES_ROUNDS:.0%}/{word}s, at least {MARGIN:.0%} "
        f"(3 {word}s: ±{margin_for(3):.0%}, 5: ±{margin_for(5):.0%}, "
        f"{math.ceil(MARGIN_TIMES_ROUNDS / MARGIN)}+: ±{MARGIN:.0%})"
    )


RULE = (
    f"verdict: faster/slower only if every round's paired ratio (path/baseline, same round) is beyond "
    f"{margins_text('round')}; else within noise; 1 round: no verdict"
)


@dataclass(frozen=True)
class Verdict:
    word: str  # one of WORDS
    ratio: float  # median of the paired per-round ratios other/baseline
    low: float  # min of the paired ratios
    high: float  # max of the paired ratios
    rounds: int

    @property
    def margin(self) -> float:
        """The rule's margin for these rounds."""
        return margin_for(self.rounds)

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
            "margin": self.margin,
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
    margin = margin_for(rounds)
    if low > 1 + margin:
        return FASTER
    if high < 1 - margin:
        return SLOWER
    return WITHIN_NOISE


def drift(baseline: Sequence[float]) -> str | None:
    """A warning when the baseline's first and last rounds differ by more than the rule allows two figures
    (``margin_for(2)``, 15%): first against last is a comparison of two runs, whatever the rounds between."""
    base = _figures("baseline", baseline)
    if len(base) < 2:
        return None
    change = base[-1] / base[0] - 1
    margin = margin_for(2)
    if abs(change) <= margin:
        return None
    return (
        f"drift: the baseline's last round is {abs(change):.0%} {'above' if change > 0 else 'below'} its first "
        f"(beyond the {margin:.0%} the rule allows two figures); the machine changed during the comparison"
    )


def resolution_hint(label: str, verdict: Verdict, what: str = "rounds") -> str | None:
    """For a path called within noise because its median ratio, though beyond the narrowest margin, lies inside
    the wider margin of few rounds: how many rounds would resolve a difference of that size (else None)."""
    margin = verdict.margin
    off = abs(verdict.ratio - 1)
    if verdict.word != WITHIN_NOISE or verdict.rounds < 2 or not MARGIN < off <= margin:
        return None
    need = next(n for n in range(verdict.rounds + 1, 1000) if margin_for(n) < off)
    return (
        f"{label}: {verdict.ratio:.2f} lies inside the ±{margin:.0%} margin of {verdict.rounds} {what}; "
        f"from {need} {what}, a difference that size is called if every one shows it"
    )


RULE_REPEATED = (
    f"verdict: faster/slower only if every repetition's ratio to every repetition it is compared "
    f"with is beyond {margins_text('repetition')}, counting the side with fewer; else within noise; "
    f"1 repetition on a side: no verdict"
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
