"""When two workload runs are level: the project's verdict rule (``compare.verdict``) cannot tell them apart.

Paths run in the same rotated rounds are paired round by round (``paired_verdict``: the sign-test interval of the
per-round ratios); saved results, or a search's runs, are compared over their ranges (``repeated_verdict``:
every ratio of one side's figure to the other's). Either way faster or slower needs the interval beyond the
margin (5%, wider with few rounds), and two runs of one pass each are never told apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xferscope.compare.verdict import MARGIN, paired_verdict, repeated_verdict

#: what a figure of 0 counts as (the rule divides)
TINY = 1e-12
#: the rule in one line, under every ranking
LEVEL_RULE = (
    "level: entries the verdict rule cannot tell apart (paired by round where run in the same rounds, else over "
    "their ranges; apart only beyond ±5%, more with few rounds)"
)


@dataclass(frozen=True)
class RoundFigures:
    """One entry's figure: each run's in the order of its rounds (empty where only the summary is known), and the
    summary (the lowest, the median, the highest, over ``runs`` runs)."""

    values: Sequence[float]
    low: float
    median: float
    high: float
    runs: int


def told_apart(
    a: RoundFigures, b: RoundFigures, *, paired: bool, higher_is_better: bool, margin: float = MARGIN
) -> bool:
    """True when the verdict rule calls one of ``a`` and ``b`` faster than the other (for a figure where lower is
    better, a time, on its reciprocal), asked both ways: the rule's bounds (1 + margin above, 1 - margin below) are
    not each other's reciprocals, and level is a relation that must not depend on which entry asks."""
    return any(_decided(x, y, paired, higher_is_better, margin) for x, y in ((a, b), (b, a)))


def _decided(a: RoundFigures, b: RoundFigures, paired: bool, higher_is_better: bool, margin: float) -> bool:

    def oriented(values: Sequence[float]) -> list[float]:
        positive = [max(v, TINY) for v in values]  # an AU of 0 is a figure too
        return positive if higher_is_better else [1.0 / v for v in positive]

    if paired and len(a.values) == len(b.values) >= 2:
        return paired_verdict(oriented(a.values), oriented(b.values), margin).decided
    summary_a, summary_b = (a.low, a.median, a.high), (b.low, b.median, b.high)
    repetitions = min(a.runs, b.runs)
    return repeated_verdict(oriented(summary_a), oriented(summary_b), margin, repetitions=repetitions).decided


def round_figures(
    values: Sequence[float], low: float | None, median: float | None, high: float | None, runs: int
) -> RoundFigures | None:
    """An entry's ``RoundFigures``; None where its summary is not known."""
    if low is None or median is None or high is None:
        return None
    return RoundFigures(values, low, median, high, runs)


def mark_level(
    entries: Sequence[Any],
    figures: Callable[[Any], RoundFigures | None],
    *,
    paired: bool,
    higher_is_better: bool,
    apart: Callable[[Any, Any], bool] | None = None,
) -> None:
    """The one level rule of every workload's ranking: each entry's ``level_with``, the labels of the others the
    verdict rule cannot tell apart from it (``figures``: an entry's, None where unknown: never level; ``apart``:
    told apart whatever their figures, as searches that sustained different accelerator counts)."""
    known = [(e, figures(e)) for e in entries]
    for e, fe in known:
        e.level_with = [
            o.label
            for o, fo in known
            if o is not e
            and fe is not None
            and fo is not None
            and not (apart is not None and apart(e, o))
            and not told_apart(fe, fo, paired=paired, higher_is_better=higher_is_better)
        ]
