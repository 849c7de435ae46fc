"""Whether one path beats another, from paired rounds: faster, slower, the same, or undecided.

A comparison runs in rounds; each round runs every path once (order rotated), so ``baseline[i]`` and
``other[i]`` were measured minutes apart on the same machine state. Their ratio cancels what the machine did
between rounds (a neighbour's load, a cache filling up); what is left is the noise between two runs in a row.

The rule, with one margin ``m`` (5% unless ``--margin`` says otherwise):

* the **interval**: a distribution-free confidence interval of the median paired ratio, from the order
  statistics of the rounds' ratios (the sign test's interval): the narrowest ``[r(k), r(n-k+1)]`` whose coverage,
  ``1 - 2 P(Binomial(n, 1/2) < k)``, is at least 90%; with fewer than 5 rounds no such pair exists and the interval
  is the whole range (75% at 3 rounds, 88% at 4). It needs no model of the noise, and one wild round moves it by
  one order statistic at most;
* **faster** / **slower** when the interval lies wholly beyond ``1 ± M(n)``, where ``M(n)`` is the larger of
  ``m`` and ``15% / (rounds - 1)`` (with m = 5%: 2 rounds 15%, 3 rounds 7.5%, 4 or more 5%): the first looks,
  whose intervals cover only 50-88%, need a wider margin;
* **same** (within ±m) when the interval lies wholly within ``1 ± m`` and covers at least 90% (5 rounds);
* **undecided** otherwise; one round gives no verdict at all.

Since ``M(n)`` is never below ``m``, the regions cannot overlap: an interval below ``1 - M(n)`` cannot lie within
``1 ± m``. Two decided verdicts on one path can then disagree only when an interval missed the truth, and
'undecided', which shows its interval, agrees with any of them.

``compare`` (``--rounds auto``) starts with 3 rounds and adds one while any path is undecided, up to
``--max-rounds`` (9). ``bench/verdict_goals.py`` measures the rule on the stand-in engine, over true ratios
from 0.90 to 1.10 and two spreads of a round's ratio.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: the margin m: a difference under it is not one to call, and an interval within 1 ± m says "same"
MARGIN = 0.05
#: with few rounds the margin widens to this over rounds - 1 (never under m)
MARGIN_TIMES_ROUNDS = 0.15
#: the margins ``--margin`` accepts
MARGIN_RANGE = (0.01, 0.5)
#: the coverage the sign-test interval aims at (with few rounds, the whole range and what it covers)
CONFIDENCE = 0.90
#: the rounds ``--rounds auto`` starts with, and adds up to by default
START_ROUNDS, MAX_ROUNDS = 3, 9
#: the baseline's first and last rounds may differ by this much before the comparison warns of drift
DRIFT = 0.15
FASTER, SLOWER, SAME, UNDECIDED, SINGLE_PASS = "faster", "slower", "same", "undecided", "single pass: no verdict"
WORDS = (FASTER, SLOWER, SAME, UNDECIDED, SINGLE_PASS)


def margin_for(rounds: int, margin: float = MARGIN) -> float:
    """M(n), the margin faster/slower must clear with this many rounds (repetitions): the larger of ``margin``
    and 15% / (rounds - 1)."""
    return max(margin, round(MARGIN_TIMES_ROUNDS / max(rounds - 1, 1), 6))


def check_margin(margin: float) -> float:
    """``margin`` if ``--margin`` may take it, else a ValueError saying what it may be."""
    low, high = MARGIN_RANGE
    if not (math.isfinite(margin) and low <= margin <= high):
        raise ValueError(f"--margin must lie between {low:g} and {high:g} (a fraction: 0.05 is 5%), got {margin:g}")
    return margin


def _pct(x: float) -> str:
    return f"{x * 100:.3g}%"


def margins_text(word: str, margin: float = MARGIN) -> str:
    """M(n) in words, for rounds or repetitions (``word``)."""
    steps = [n for n in range(2, 12) if margin_for(n, margin) > margin]
    wide = ", ".join(f"{n}: ±{_pct(margin_for(n, margin))}" for n in steps)
    last = (steps[-1] + 1) if steps else 2
    steps_text = f"{wide}, {last}+" if wide else f"{last}+"
    return (
        f"1 ± the larger of {_pct(margin)} and {MARGIN_TIMES_ROUNDS:.0%}/({word}s - 1) ({steps_text}: ±{_pct(margin)})"
    )


def sign_test_interval(ratios: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, coverage): the narrowest interval of order statistics ``[r(k), r(n-k+1)]`` that covers the
    median with at least ``confidence`` (the sign test's), or the whole range with what it covers."""
    s = sorted(ratios)
    n = len(s)
    if n == 0:
        raise ValueError("no ratios")
    best = (s[0], s[-1], 1 - 2 / 2**n if n > 1 else 0.0)
    below = 0
    for k in range(1, (n + 1) // 2 + 1):
        below += math.comb(n, k - 1)  # P(Binomial(n, 1/2) < k) * 2**n
        coverage = 1 - 2 * below / 2**n
        if coverage < confidence:
            break
        best = (s[k - 1], s[n - k], coverage)
    return best


INTERVAL_TEXT = (
    f"interval: the sign test's for the median ratio (order statistics of the rounds' ratios), at least "
    f"{CONFIDENCE:.0%} from 5 rounds; fewer rounds give their whole range (3: {1 - 2 / 2**3:.0%}, "
    f"4: {1 - 2 / 2**4:.0%})"
)


def rule_text(margin: float = MARGIN, repeated: bool = False) -> str:
    """The rule in one line, with the margin it ran with: for paired rounds, or (``repeated``) for figures not
    measured in the same rounds (``repeated_verdict``)."""
    m = _pct(margin)
    if repeated:
        return (
            "verdict: faster/slower only if every repetition's ratio to every repetition it is compared with is "
            f"beyond {margins_text('repetition', margin)}, counting the side with fewer; same if every one lies "
            f"within 1 ± {m}; else undecided; 1 repetition on a side: no verdict"
        )
    return (
        f"verdict: faster/slower when the interval lies wholly beyond {margins_text('round', margin)}; same when it "
        f"lies within 1 ± {m} and covers at least {CONFIDENCE:.0%} (5 rounds); else undecided; 1 round: no "
        f"verdict. {INTERVAL_TEXT}"
    )


RULE = rule_text()


@dataclass(frozen=True)
class Verdict:
    word: str  # one of WORDS
    ratio: float  # median of the paired per-round ratios other/baseline
    low: float  # the interval's low end (``sign_test_interval``; for repetitions, every cross ratio)
    high: float  # its high end
    rounds: int
    coverage: float | None = None  # what the interval covers (None: every ratio of two sides, not a test)
    range_low: float | None = None  # min and max of the paired ratios
    range_high: float | None = None
    round_sd: float | None = None  # sd of the log of a round's paired ratio (None: under 2 rounds, or not paired)
    unit: str = "rounds"  # what ``rounds`` counts: rounds, or repetitions (``repeated_verdict``)
    equivalence: float = MARGIN  # the margin m the rule ran with

    @property
    def margin(self) -> float:
        """M(n): the margin faster/slower had to clear with these rounds."""
        return margin_for(self.rounds, self.equivalence)

    @property
    def decided(self) -> bool:
        """True for faster or slower."""
        return self.word in (FASTER, SLOWER)

    @property
    def settled(self) -> bool:
        """True for faster, slower or same: more rounds are not needed."""
        return self.word in (FASTER, SLOWER, SAME)

    @property
    def text(self) -> str:
        """The verdict in words: ``same within ±5%``, ``undecided after 5 rounds``, or the word."""
        if self.word == SAME:
            return f"same within ±{_pct(self.equivalence)}"
        if self.word == UNDECIDED:
            return f"undecided after {self.rounds} {self.unit}"
        return self.word

    def spread(self) -> str:
        """The ratio with its interval, e.g. ``1.12 (1.07-1.18)``; a single pass shows the one ratio."""
        if self.rounds < 2:
            return f"{self.ratio:.2f}"
        return f"{self.ratio:.2f} ({self.low:.2f}-{self.high:.2f})"

    def as_dict(self) -> dict:
        return {
            "verdict": self.word,
            "ratio": self.ratio,
            "interval_low": self.low,
            "interval_high": self.high,
            "interval_coverage": self.coverage,
            "ratio_min": self.range_low if self.range_low is not None else self.low,
            "ratio_max": self.range_high if self.range_high is not None else self.high,
            "rounds": self.rounds,
            "margin": self.margin,
            "equivalence": self.equivalence,
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


def paired_verdict(baseline: Sequence[float], other: Sequence[float], margin: float = MARGIN) -> Verdict:
    """The verdict on ``other`` against ``baseline``, measured round by round (higher is better), with the
    margin m ``margin``."""
    ratios = paired_ratios(baseline, other)
    low, high, coverage = sign_test_interval(ratios)
    return Verdict(
        word=_word(len(ratios), low, high, margin, same_allowed=coverage >= CONFIDENCE),
        ratio=statistics.median(ratios),
        low=low,
        high=high,
        rounds=len(ratios),
        coverage=coverage,
        range_low=min(ratios),
        range_high=max(ratios),
        round_sd=statistics.stdev([math.log(r) for r in ratios]) if len(ratios) > 1 else None,
        equivalence=margin,
    )


def _word(rounds: int, low: float, high: float, m: float = MARGIN, same_allowed: bool = True) -> str:
    """The rule itself, on an interval: beyond the margin on one side, within the equivalence margin, or
    neither; with two rounds (repetitions) or more. ``same_allowed``: False where the interval covers less than
    ``CONFIDENCE`` (3 or 4 rounds): "same" is a claim about the whole interval, and a range of 3 rounds covers 75%."""
    if rounds < 2:
        return SINGLE_PASS
    margin = margin_for(rounds, m)
    if low > 1 + margin:
        return FASTER
    if high < 1 - margin:
        return SLOWER
    if same_allowed and low >= 1 - m and high <= 1 + m:
        return SAME
    return UNDECIDED


def drift(baseline: Sequence[float]) -> str | None:
    """A warning when the baseline's first and last rounds differ by more than ``DRIFT`` (15%): the machine
    changed during the comparison."""
    base = _figures("baseline", baseline)
    if len(base) < 2:
        return None
    change = base[-1] / base[0] - 1
    if abs(change) <= DRIFT:
        return None
    return (
        f"drift: the baseline's last round is {abs(change):.0%} {'above' if change > 0 else 'below'} its first "
        f"(beyond {DRIFT:.0%}); the machine changed during the comparison"
    )


#: the sign test's efficiency against a t test under normal noise (2 / pi): it needs about 1 / 0.64 the rounds
SIGN_TEST_EFFICIENCY = 2 / math.pi
#: the one-sided normal quantile of the interval's 90% (5% on each side), and that of 80% power
Z_90, Z_POWER_80 = 1.6449, 0.8416


def rounds_to_settle(verdict: Verdict) -> int | None:
    """About how many rounds would put the interval beyond the narrowest margin, 4 times in 5, for a difference
    the size of this median at the spread these rounds showed (a normal approximation of the sign test); None
    where the median does not lie beyond that margin, or the spread is unknown."""
    if verdict.round_sd is None or verdict.ratio <= 0:
        return None
    effect = abs(math.log(verdict.ratio)) - math.log(1 + verdict.equivalence)
    if effect <= 0:
        return None
    n = ((Z_90 + Z_POWER_80) * verdict.round_sd / effect) ** 2 / SIGN_TEST_EFFICIENCY
    return max(verdict.rounds + 1, math.ceil(n))


def resolution_hint(label: str, verdict: Verdict, what: str = "rounds") -> str | None:
    """For an undecided path whose median ratio lies beyond the narrowest margin: how far its interval reaches,
    and about how many rounds would settle a difference that size at the spread its rounds showed."""
    off = abs(verdict.ratio - 1)
    if verdict.word != UNDECIDED or verdict.rounds < 2 or off <= verdict.equivalence:
        return None
    text = (
        f"{label}: {verdict.ratio:.2f}, interval {verdict.low:.2f}-{verdict.high:.2f} after {verdict.rounds} {what}, "
        f"reaches across 1 ± {_pct(verdict.margin)}"
    )
    need = rounds_to_settle(verdict)
    if need is None:
        return text + f": more {what} (--max-rounds) may settle it"
    sd = f"a round's ratio spreading {verdict.round_sd:.1%} (sd)"
    if need > 50:
        return text + f"; with {sd}, a difference this size would take more than 50 {what} to settle"
    return (
        text
        + f"; with {sd}, about {need} {what} would settle a difference this size 4 times in 5 (--max-rounds {need})"
    )


RULE_REPEATED = rule_text(repeated=True)


def repeated_verdict(
    before: Sequence[float], after: Sequence[float], margin: float = MARGIN, repetitions: int | None = None
) -> Verdict:
    """The verdict on ``after`` against ``before`` when their figures were not measured in the same rounds (a
    sweep against an earlier file, grid points run one after another): the same margin over every ratio of
    an ``after`` figure to a ``before`` figure, i.e. ``min(after)/max(before)`` and ``max(after)/min(before)``.
    ``ratio`` is the ratio of the medians; ``rounds`` the fewer repetitions of the two sides (``repetitions``
    where the figures given are a summary of more: a minimum, median and maximum)."""
    old, new = _figures("before", before), _figures("after", after)
    if not old or not new:
        raise ValueError("no figures to compare")
    ratio = statistics.median(new) / statistics.median(old)
    low, high = min(new) / max(old), max(new) / min(old)
    n = repetitions if repetitions is not None else min(len(old), len(new))
    return Verdict(
        word=_word(n, low, high, margin),
        ratio=ratio,
        low=low,
        high=high,
        rounds=n,
        unit="repetitions",
        equivalence=margin,
    )
