"""The paired verdict rule on synthetic rounds: clear win, clear loss, overlap, same, undecided, the sign-test
interval, drift, single pass, A/A noise."""

import math
import random
import statistics

import pytest

from xferscope.compare.verdict import (
    FASTER,
    MARGIN,
    RULE,
    SAME,
    SINGLE_PASS,
    SLOWER,
    UNDECIDED,
    Verdict,
    check_margin,
    drift,
    margin_for,
    paired_ratios,
    paired_verdict,
    repeated_verdict,
    resolution_hint,
    rule_text,
    sign_test_interval,
)


def test_clear_win_the_interval_beyond_the_margin():
    v = paired_verdict([1000, 700, 1200], [1500, 1050, 1700])
    assert v.word == FASTER
    assert v.rounds == 3
    assert v.ratio == pytest.approx(1.5)
    assert v.low == pytest.approx(1700 / 1200)
    assert v.high == pytest.approx(1.5)
    assert v.decided and v.settled and v.text == "faster"


def test_clear_loss_the_interval_beyond_the_margin():
    v = paired_verdict([1000, 1000, 1000, 1000, 1000], [700, 760, 720, 810, 740])
    assert v.word == SLOWER
    assert v.ratio == pytest.approx(0.74)
    assert (v.low, v.high) == (pytest.approx(0.70), pytest.approx(0.81))
    assert v.coverage == pytest.approx(1 - 2 / 32)  # 5 rounds: the whole range covers 93.75%


def test_overlap_is_undecided_even_when_the_median_differs_a_lot():
    # two rounds say much faster, one says slower: the interval holds both, so no verdict
    v = paired_verdict([1000, 1000, 1000], [1400, 1500, 900])
    assert v.word == UNDECIDED and v.text == "undecided after 3 rounds"
    assert v.ratio == pytest.approx(1.4)
    assert not v.decided and not v.settled


def test_an_interval_within_the_equivalence_margin_is_the_same():
    v = paired_verdict([1000] * 5, [990, 1020, 1010, 1040, 1000])
    assert v.word == SAME and v.settled and not v.decided
    assert v.text == "same within ±5%"
    # reaching past 1 ± 5% on one side and not beyond the margin on the other: undecided
    assert paired_verdict([1000] * 5, [990, 1020, 1010, 1060, 1070]).word == UNDECIDED


def test_same_needs_an_interval_of_90_percent_five_rounds():
    # four rounds within 1 ± 1%: their range covers 88% of the median's place, short of 90%, so not yet "same"
    v = paired_verdict([1000] * 4, [990, 1000, 1005, 1010])
    assert v.word == UNDECIDED and v.coverage == pytest.approx(0.875)
    assert paired_verdict([1000] * 5, [990, 1000, 1005, 1010, 1000]).word == SAME


def test_the_margin_narrows_as_the_rounds_grow_down_to_m():
    assert MARGIN == 0.05
    assert [margin_for(n) for n in (2, 3, 4, 5, 6, 10)] == [0.15, 0.075, MARGIN, MARGIN, MARGIN, MARGIN]
    assert [margin_for(n, 0.03) for n in (2, 3, 4, 5, 6, 10)] == [0.15, 0.075, 0.05, 0.0375, 0.03, 0.03]
    assert [margin_for(n, 0.2) for n in (2, 3, 9)] == [0.2, 0.2, 0.2]
    # 6% in every round: inside the margin of 3 rounds and past 1 ± 5% (undecided), beyond that of 4; 4% is
    # within 1 ± 5% (undecided at 3 rounds, whose range covers 75%; same from 5), never faster with m = 5%
    assert paired_verdict([1000] * 3, [1060] * 3).word == UNDECIDED
    assert paired_verdict([1000] * 4, [1060] * 4).word == FASTER
    assert paired_verdict([1000] * 4, [940] * 4).word == SLOWER
    assert paired_verdict([1000] * 3, [1040] * 3).word == UNDECIDED
    assert paired_verdict([1000] * 5, [1040] * 5).word == SAME
    assert paired_verdict([1000] * 5, [1040] * 5, margin=0.03).word == FASTER
    assert paired_verdict([1000] * 3, [1040] * 3).margin == pytest.approx(0.075)


@pytest.mark.parametrize("m", [0.01, 0.03, 0.05, 0.1, 0.2])
def test_no_interval_within_1_plus_or_minus_m_is_called_faster_or_slower(m):
    # every interval of 2 to 12 rounds with ends on a 0.5% grid: an interval the rule calls slower or faster lies
    # wholly outside 1 ± m, so a path called slower in one invocation is never "same" in another unless one of
    # the two intervals missed the truth
    from xferscope.compare.verdict import _word

    for n in range(2, 13):
        for low_i in range(160, 241):
            for high_i in range(low_i, 241):
                low, high = low_i / 200, high_i / 200
                word = _word(n, low, high, m)
                if word == SLOWER:
                    assert high < 1 - m and high < 1 - margin_for(n, m), (n, low, high)
                elif word == FASTER:
                    assert low > 1 + m, (n, low, high)
                elif word == SAME:
                    assert 1 - m <= low and high <= 1 + m, (n, low, high)


def test_the_margin_is_checked_and_carried():
    assert check_margin(0.05) == 0.05
    for bad in (0.0, -0.1, 0.6, float("nan")):
        with pytest.raises(ValueError, match="--margin must lie between"):
            check_margin(bad)
    v = paired_verdict([1000] * 5, [1080] * 5, margin=0.1)
    assert v.word == SAME and v.text == "same within ±10%" and v.as_dict()["equivalence"] == 0.1
    assert repeated_verdict([1000, 1010], [1080, 1090], margin=0.1).word == SAME
    assert "±10%" in rule_text(0.1) and "\n" not in rule_text(0.1)


@pytest.mark.parametrize("n", range(1, 16))
def test_the_sign_test_interval_has_the_coverage_it_claims(n):
    ratios = [1 + i / 100 for i in range(n)]
    low, high, coverage = sign_test_interval(ratios)
    # the claim, from the binomial distribution directly
    k = ratios.index(low) + 1
    assert ratios.index(high) == n - k
    claimed = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n
    assert coverage == pytest.approx(claimed if n > 1 else 0.0)
    if n >= 5:
        assert coverage >= 0.90
        # the next pair inward would cover less than 90%
        if k + 1 <= (n + 1) // 2:
            assert 1 - 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n < 0.90
    else:
        assert (low, high) == (min(ratios), max(ratios))


def test_the_interval_covers_the_true_median_as_often_as_it_says():
    rng = random.Random(5)
    for n in (5, 8, 9, 12):
        hits = 0
        trials = 3000
        coverage = sign_test_interval([1.0] * n)[2]
        for _ in range(trials):
            low, high, _ = sign_test_interval([math.exp(rng.gauss(0, 0.1)) for _ in range(n)])
            hits += low <= 1.0 <= high
        assert abs(hits / trials - coverage) < 0.03, (n, hits / trials, coverage)


def test_a_wild_round_moves_the_interval_by_one_order_statistic_at_most():
    calm = [0.88, 0.89, 0.90, 0.90, 0.91, 0.91, 0.92, 0.93, 0.94]
    v = paired_verdict([1.0] * 9, calm)
    wild = paired_verdict([1.0] * 9, [*calm[:-1], 3.0])  # one round 3x: the interval keeps its 8th value
    assert (v.low, v.high) == (wild.low, wild.high) == (0.89, 0.93)
    assert v.word == wild.word == SLOWER and v.range_high == 0.94 and wild.range_high == 3.0


def test_an_undecided_difference_beyond_the_floor_says_how_many_rounds_would_settle_it():
    v = paired_verdict([1000] * 3, [1060, 1080, 1120])
    hint = resolution_hint("host#2", v)
    assert v.word == UNDECIDED and hint and "1.08" in hint and "3 rounds" in hint and "--max-rounds" in hint
    # the estimate: ((z_90 + z_power) sd / (|ln r| - ln (1 + m)))^2 / (2 / pi), from the spread these rounds showed
    logs = [math.log(x) for x in (1.06, 1.08, 1.12)]
    sd = statistics.stdev(logs)
    need = math.ceil(((1.6449 + 0.8416) * sd / (math.log(1.08) - math.log(1.05))) ** 2 / (2 / math.pi))
    assert v.round_sd == pytest.approx(sd) and f"about {max(need, 4)} rounds would settle" in hint
    assert f"spreading {sd:.1%} (sd)" in hint
    # the claim, simulated: a true 1.08 with a round's ratio spreading 6%, at the rounds the formula gives for
    # them, settles as faster about 4 times in 5
    from xferscope.compare.verdict import rounds_to_settle

    n = rounds_to_settle(Verdict(UNDECIDED, 1.08, 1.0, 1.2, 3, round_sd=0.06))
    assert n == math.ceil(((1.6449 + 0.8416) * 0.06 / (math.log(1.08) - math.log(1.05))) ** 2 / (2 / math.pi))
    rng = random.Random(9)
    settled = sum(
        paired_verdict([1.0] * n, [1.08 * math.exp(rng.gauss(0, 0.06)) for _ in range(n)]).word == FASTER
        for _ in range(2000)
    )
    assert 0.7 <= settled / 2000 <= 0.95, (n, settled)
    # under the floor, or settled: no hint
    assert resolution_hint("x", paired_verdict([1000] * 3, [1020, 1025, 1070])) is None
    assert resolution_hint("x", paired_verdict([1000] * 3, [1200] * 3)) is None


def test_pairing_cancels_what_the_machine_did_between_rounds():
    # the machine slows down threefold over the rounds; the other path is 20% faster in each round
    base = [3000, 2000, 1000]
    v = paired_verdict(base, [b * 1.2 for b in base])
    assert v.word == FASTER and v.ratio == pytest.approx(1.2)
    # unpaired, the ranges overlap completely: min/max of other (1200-3600) straddles the baseline's median
    assert min(b * 1.2 for b in base) < sorted(base)[1] < max(b * 1.2 for b in base)


def test_single_pass_gives_no_verdict_but_keeps_its_ratio():
    v = paired_verdict([1000], [2000])
    assert v.word == SINGLE_PASS
    assert v.ratio == v.low == v.high == pytest.approx(2.0)
    assert v.spread() == "2.00"


def test_spread_and_dict_carry_the_interval_and_the_range():
    v = paired_verdict([100, 100, 100], [115, 120, 130])
    assert v.spread() == "1.20 (1.15-1.30)"
    assert v.as_dict() == {
        "verdict": FASTER,
        "ratio": pytest.approx(1.2),
        "interval_low": pytest.approx(1.15),
        "interval_high": pytest.approx(1.3),
        "interval_coverage": pytest.approx(0.75),
        "ratio_min": pytest.approx(1.15),
        "ratio_max": pytest.approx(1.3),
        "rounds": 3,
        "margin": pytest.approx(0.075),
        "equivalence": MARGIN,
    }
    assert isinstance(v, Verdict)


def test_drift_warns_when_first_and_last_baseline_rounds_differ_beyond_the_margin():
    warning = drift([1000, 950, 900, 850, 800])
    assert warning and "20% below" in warning
    assert "above" in drift([800, 900, 1000])
    assert drift([1000, 700, 1010]) is None  # noisy in between, but no drift from first to last
    assert drift([1000]) is None
    # first against last is two figures, whatever the rounds: 15%
    assert drift([1000, 1000, 1080]) is None
    assert drift([1000, 1000, 1000, 1000, 1000, 1140]) is None
    assert "16% above" in drift([1000, 1000, 1000, 1000, 1000, 1160])


def test_a_and_a_with_the_noise_of_a_shared_disk_rarely_says_faster_or_slower_at_any_round_count():
    # a round's A/A ratio with a 7% spread, the machine's speed wandering between rounds
    rng = random.Random(17)
    trials = 4000
    for rounds in (2, 3, 4, 5, 6, 9):
        decided = 0
        for _ in range(trials):
            speeds = [rng.uniform(500, 1500) for _ in range(rounds)]
            a = [s * rng.gauss(1, 0.05) for s in speeds]
            b = [s * rng.gauss(1, 0.05) for s in speeds]
            decided += paired_verdict(a, b).decided
        assert decided <= trials * 0.015, (rounds, decided)


def test_a_and_a_with_little_noise_is_the_same():
    # the same path twice with 1% run-to-run noise and a machine whose speed wanders between rounds
    rng = random.Random(16)
    words = []
    for _ in range(500):
        speeds = [rng.uniform(500, 1500) for _ in range(5)]
        a = [s * rng.gauss(1, 0.01) for s in speeds]
        b = [s * rng.gauss(1, 0.01) for s in speeds]
        words.append(paired_verdict(a, b).word)
    assert words.count(SAME) >= 490 and FASTER not in words and SLOWER not in words


def test_bad_rounds_are_refused_plainly():
    with pytest.raises(ValueError, match="differ in number"):
        paired_ratios([1, 2], [1])
    with pytest.raises(ValueError, match="no rounds"):
        paired_verdict([], [])
    with pytest.raises(ValueError, match="positive"):
        paired_verdict([0, 1], [1, 1])


def test_rule_is_one_line_naming_the_margins_and_the_interval():
    assert "\n" not in RULE
    assert f"{MARGIN:.0%}" in RULE and f"1 ± {MARGIN:.0%}" in RULE and "sign test" in RULE


def test_repeated_figures_need_every_cross_ratio_beyond_the_margin():
    from xferscope.compare.verdict import RULE_REPEATED, repeated_verdict

    v = repeated_verdict([1000, 1050, 980], [700, 720, 690])
    assert v.word == SLOWER and v.ratio == pytest.approx(700 / 1000) and v.rounds == 3
    assert v.high == pytest.approx(720 / 980) and v.low == pytest.approx(690 / 1050)
    assert repeated_verdict([1000, 1010], [1200, 1300, 1250]).word == FASTER
    # the ranges overlap: one earlier repetition was as slow as the new ones
    assert repeated_verdict([1000, 1050, 700], [700, 720, 690]).word == UNDECIDED
    assert repeated_verdict([1000, 1010], [990, 1020]).word == SAME
    # one noisy point on either side is never called a regression
    lone = repeated_verdict([1000], [500, 510, 505])
    assert lone.word == SINGLE_PASS and lone.ratio == pytest.approx(0.505)
    assert "\n" not in RULE_REPEATED and f"{MARGIN:.0%}" in RULE_REPEATED
