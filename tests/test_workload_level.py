"""When two workload runs are level (``workloads.common.level``): the project's verdict rule, paired by round where
the runs shared rounds, over their ranges otherwise."""

from __future__ import annotations

from types import SimpleNamespace

from xferscope.workloads.common.level import RoundFigures, told_apart
from xferscope.workloads.common.side_by_side import entries


def figures(values: list[float]) -> RoundFigures:
    return RoundFigures(values, min(values), sorted(values)[len(values) // 2], max(values), len(values))


def test_rounds_that_drift_together_are_told_apart_round_by_round_though_their_ranges_overlap():
    """The disk slows down over the rounds for both paths alike; B takes 10% longer in every round. Their ranges
    overlap (the old "level" rule called them level), the per-round ratios do not."""
    a = [1.0, 1.2, 1.4, 1.6, 1.8, 2.0]
    b = [x * 1.10 for x in a]
    assert told_apart(figures(a), figures(b), paired=True, higher_is_better=False)
    assert not told_apart(figures(a), figures(b), paired=False, higher_is_better=False)  # unpaired: only the ranges


def test_one_pass_each_is_never_told_apart_and_an_a_a_pair_is_level():
    assert not told_apart(figures([0.95]), figures([0.60]), paired=True, higher_is_better=True)
    noisy = [1.0, 1.03, 0.98, 1.01, 0.99]
    assert not told_apart(figures(noisy), figures(list(reversed(noisy))), paired=True, higher_is_better=False)


def test_ranges_far_apart_are_told_apart_and_an_au_of_zero_is_a_figure():
    assert told_apart(figures([0.50, 0.52, 0.51]), figures([0.90, 0.91, 0.92]), paired=False, higher_is_better=True)
    assert told_apart(figures([0.0, 0.0, 0.0]), figures([0.9, 0.9, 0.9]), paired=False, higher_is_better=True)
    assert not told_apart(figures([0.0, 0.0]), figures([0.0, 0.0]), paired=True, higher_is_better=True)


def test_paths_in_the_same_rounds_are_ranked_with_the_paired_rule():
    def run(seconds: float):
        return SimpleNamespace(status="ok", load_s=seconds, gb_per_s=1.0, cpu_s_per_gib=0.1)

    a = [1.0, 1.2, 1.4, 1.6, 1.8, 2.0]
    runs = {"a": ("host", [run(x) for x in a]), "b": ("bounce", [run(x * 1.1) for x in a])}
    ranked = entries(runs, lambda r: r.load_s, paired=True)
    assert [e.label for e in ranked] == ["a", "b"] and all(e.level_with == [] for e in ranked)
    assert [e.level_with for e in entries(runs, lambda r: r.load_s)] == [["b"], ["a"]]  # saved: ranges overlap
