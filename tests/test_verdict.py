"""The paired verdict rule on synthetic rounds: clear win, clear loss, overlap, drift, single pass, A/A noise."""

import random

import pytest

from xferscope.verdict import (
    FASTER,
    MARGIN,
    RULE,
    SINGLE_PASS,
    SLOWER,
    WITHIN_NOISE,
    Verdict,
    drift,
    margin_for,
    paired_ratios,
    paired_verdict,
    resolution_hint,
)


def test_clear_win_every_round_beyond_the_margin():
    v = paired_verdict([1000, 700, 1200], [1500, 1050, 1700])
    assert v.word == FASTER
    assert v.rounds == 3
    assert v.ratio == pytest.approx(1.5)
    assert v.low == pytest.approx(1700 / 1200)
    assert v.high == pytest.approx(1.5)
    assert v.decided


def test_clear_loss_every_round_beyond_the_margin():
    v = paired_verdict([1000, 1000, 1000, 1000, 1000], [700, 760, 720, 810, 740])
    assert v.word == SLOWER
    assert v.ratio == pytest.approx(0.74)
    assert (v.low, v.high) == (pytest.approx(0.70), pytest.approx(0.81))


def test_overlap_is_within_noise_even_when_the_median_differs_a_lot():
    # two rounds say much faster, one says slower: the sign depends on the round, so no verdict
    v = paired_verdict([1000, 1000, 1000], [1400, 1500, 900])
    assert v.word == WITHIN_NOISE
    assert v.ratio == pytest.approx(1.4)
    assert not v.decided


def test_a_round_inside_the_margin_keeps_it_within_noise():
    v = paired_verdict([1000, 1000, 1000], [1200, 1300, 1000 * (1 + MARGIN / 2)])
    assert v.word == WITHIN_NOISE


def test_the_margin_narrows_as_the_rounds_grow_down_to_the_floor():
    assert [margin_for(n) for n in (2, 3, 4, 5, 6, 10)] == [0.15, 0.10, 0.075, 0.06, MARGIN, MARGIN]
    # 8% in every round: inside the margin of 3 rounds, beyond that of 4
    assert paired_verdict([1000] * 3, [1080] * 3).word == WITHIN_NOISE
    assert paired_verdict([1000] * 4, [1080] * 4).word == FASTER
    assert paired_verdict([1000] * 4, [920] * 4).word == SLOWER
    assert paired_verdict([1000] * 3, [1080] * 3).margin == pytest.approx(0.10)


def test_a_difference_inside_the_margin_of_few_rounds_says_how_many_would_resolve_it():
    v = paired_verdict([1000] * 3, [1070, 1080, 1090])
    hint = resolution_hint("host#2", v)
    assert hint and "±10%" in hint and "3 rounds" in hint and "from 4 rounds" in hint
    # a round on the other side (the spread, not the margin, keeps it within noise): no hint
    assert resolution_hint("x", paired_verdict([1000] * 5, [1080, 1070, 1090, 1040, 1100])) is None
    # under the floor, or decided: no hint
    assert resolution_hint("x", paired_verdict([1000] * 3, [1030] * 3)) is None
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


def test_spread_and_dict_carry_the_range():
    v = paired_verdict([100, 100, 100], [115, 120, 130])
    assert v.spread() == "1.20 (1.15-1.30)"
    assert v.as_dict() == {
        "verdict": FASTER,
        "ratio": pytest.approx(1.2),
        "ratio_min": pytest.approx(1.15),
        "ratio_max": pytest.approx(1.3),
        "rounds": 3,
        "margin": pytest.approx(0.10),
    }
    assert isinstance(v, Verdict)


def test_drift_warns_when_first_and_last_baseline_rounds_differ_beyond_the_margin():
    warning = drift([1000, 950, 900, 850, 800])
    assert warning and "20% below" in warning
    assert "above" in drift([800, 900, 1000])
    assert drift([1000, 700, 1010]) is None  # noisy in between, but no drift from first to last
    assert drift([1000]) is None
    # first against last is two figures, whatever the rounds: the margin of two (15%)
    assert drift([1000, 1000, 1080]) is None
    assert drift([1000, 1000, 1000, 1000, 1000, 1140]) is None
    assert "16% above" in drift([1000, 1000, 1000, 1000, 1000, 1160])


def test_a_and_a_with_the_noise_of_a_shared_disk_stays_within_noise_at_every_round_count():
    # a round's A/A ratio with a 7% spread, the machine's speed wandering between rounds: the false verdicts
    # stay near 0.1% from 2 to 6 rounds, where a fixed 5% margin gave about 3% at 3 rounds
    rng = random.Random(17)
    trials = 4000
    for rounds in (2, 3, 4, 5, 6):
        decided = fixed = 0
        for _ in range(trials):
            speeds = [rng.uniform(500, 1500) for _ in range(rounds)]
            a = [s * rng.gauss(1, 0.05) for s in speeds]
            b = [s * rng.gauss(1, 0.05) for s in speeds]
            decided += paired_verdict(a, b).decided
            ratios = [y / x for x, y in zip(a, b)]
            fixed += min(ratios) > 1 + MARGIN or max(ratios) < 1 - MARGIN
        assert decided <= trials * 0.004, (rounds, decided)
        if rounds == 3:
            assert fixed >= trials * 0.015, fixed  # what the margin of 5% alone let through


def test_a_and_a_with_noise_stays_within_noise():
    # the same path twice with 3% run-to-run noise and a machine whose speed wanders between rounds
    rng = random.Random(16)
    decided = 0
    for _ in range(500):
        speeds = [rng.uniform(500, 1500) for _ in range(3)]
        a = [s * rng.gauss(1, 0.03) for s in speeds]
        b = [s * rng.gauss(1, 0.03) for s in speeds]
        decided += paired_verdict(a, b).decided
    assert decided <= 5


def test_bad_rounds_are_refused_plainly():
    with pytest.raises(ValueError, match="differ in number"):
        paired_ratios([1, 2], [1])
    with pytest.raises(ValueError, match="no rounds"):
        paired_verdict([], [])
    with pytest.raises(ValueError, match="positive"):
        paired_verdict([0, 1], [1, 1])


def test_rule_is_one_line_naming_the_margin():
    assert "\n" not in RULE
    assert f"{MARGIN:.0%}" in RULE and "every round" in RULE


def test_repeated_figures_need_every_cross_ratio_beyond_the_margin():
    from xferscope.verdict import RULE_REPEATED, repeated_verdict

    v = repeated_verdict([1000, 1050, 980], [700, 720, 690])
    assert v.word == SLOWER and v.ratio == pytest.approx(700 / 1000) and v.rounds == 3
    assert v.high == pytest.approx(720 / 980) and v.low == pytest.approx(690 / 1050)
    assert repeated_verdict([1000, 1010], [1200, 1300, 1250]).word == FASTER
    # the ranges overlap: one earlier repetition was as slow as the new ones
    assert repeated_verdict([1000, 1050, 700], [700, 720, 690]).word == WITHIN_NOISE
    # one noisy point on either side is never called a regression
    lone = repeated_verdict([1000], [500, 510, 505])
    assert lone.word == SINGLE_PASS and lone.ratio == pytest.approx(0.505)
    assert "\n" not in RULE_REPEATED and f"{MARGIN:.0%}" in RULE_REPEATED
