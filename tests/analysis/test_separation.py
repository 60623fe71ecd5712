"""The separation statement says what the data support: exponents where both arms reached the
threshold in every run, bounds on the ratio of samples where censored runs enter, "did not
hold" only where the data speak against the claim, "no verdict" only where they cannot decide."""
import math

import numpy as np
import pytest

from archsep.analysis.separation import km_medians, ratio_at, separation
from archsep.analysis.stats import km_median

BUDGET = 56_000
TF = {8: np.array([16_000.0, 17_000, 18_000]), 12: np.array([20_000.0, 21_500, 23_000]),
      16: np.array([25_000.0, 26_700, 28_000])}


def flags(data: dict, censored_at=()) -> dict:
    return {n: np.full(len(v), n in censored_at) for n, v in data.items()}


def at_budget(Ns) -> dict:
    return {n: np.full(3, float(BUDGET)) for n in Ns}


def test_a_mixer_that_never_reaches_the_threshold_is_a_separation_in_samples_with_per_n_bounds():
    """The researcher's minGRU: the TF reaches the threshold at every N, the mixer at none within
    56k samples. The exponents say nothing (a flat line at the budget); the samples say the mixer
    needs more than 56000 / median(TF) at each N."""
    mixer = at_budget(TF)
    s = separation("TF", TF, "minGRU", mixer, censored_a=flags(TF), censored_b=flags(mixer, TF))
    assert s.basis == "samples" and s.held is True
    text = s.text()
    for N in TF:
        bound = BUDGET / np.median(TF[N])
        assert f"N={N}: >= {bound:.2f}x" in text
    assert [r.kind for r in s.ratios] == ["support"] * 3
    assert "minGRU needs more samples than TF at N = 8, 12, 16" in text and "did not hold" not in text
    assert s.to_dict()["ratios"][0]["kind"] == "support"


def test_a_mixer_that_learns_only_at_the_smallest_n_is_a_separation_not_evidence_against():
    """Mamba in the same trial: it reached the threshold at N = 8 and at no larger N. The old
    statement read 'did not hold' (a flat exponent through the budget)."""
    mamba = {8: np.array([30_000.0, 34_000, 38_000]), **at_budget((12, 16))}
    s = separation("TF", TF, "Mamba", mamba, censored_a=flags(TF), censored_b=flags(mamba, (12, 16)))
    assert s.basis == "samples" and s.held is True
    assert s.ratios[0].better_reached and s.ratios[0].worse_reached
    assert not s.ratios[-1].worse_reached and math.isinf(s.ratios[-1].high)


def test_the_better_arm_censored_where_the_worse_one_reached_is_evidence_against():
    worse = {n: v * 0.5 for n, v in TF.items()}
    tf = {**TF, 16: np.full(3, 30_000.0)}  # censored at a 30k budget at N = 16
    s = separation("TF", tf, "X", worse, censored_a=flags(tf, (16,)), censored_b=flags(worse))
    assert s.basis == "samples" and s.held is False
    assert "TF needs more samples than X at N = 16: evidence against" in s.text()


def test_both_arms_censored_everywhere_is_no_verdict():
    a, b = at_budget(TF), at_budget(TF)
    s = separation("TF", a, "X", b, censored_a=flags(a, TF), censored_b=flags(b, TF))
    assert s.held is None and "neither arm reached the threshold" in s.text()


def test_a_bound_too_weak_to_decide_is_no_verdict_not_did_not_hold():
    """The mixer is censored at a budget no larger than some of the TF's samples: its lower
    bound includes a ratio of 1, so nothing is shown either way."""
    mixer = {n: np.full(3, float(np.median(v))) for n, v in TF.items()}
    s = separation("TF", TF, "X", mixer, censored_b=flags(mixer, TF))
    assert s.held is None and "raise the budget" in s.text()


def test_even_at_the_largest_n_with_both_measured_did_not_hold():
    worse = {8: np.full(3, float(BUDGET)), 12: TF[12] * 1.02, 16: TF[16] * 1.01}
    s = separation("TF", TF, "X", worse, censored_b=flags(worse, (8,)))
    assert s.basis == "samples" and s.held is False and "no separation in samples there" in s.text()


def test_a_crossover_at_small_n_does_not_speak_against_a_separation_at_the_largest():
    """The worse arm is faster at N = 8 and censored beyond; one TF run at N = 8 is censored too
    (its exponent unidentified): the verdict in samples rests on the largest N."""
    worse = {8: TF[8] * 0.5, **at_budget((12, 16))}
    tf_cens = {**flags(TF), 8: np.array([False, False, True])}
    s = separation("TF", TF, "X", worse, censored_a=tf_cens, censored_b=flags(worse, (12, 16)))
    assert s.basis == "samples" and s.held is True and "(below 1 at N = 8)" in s.text()


def test_uncensored_arms_are_compared_by_their_exponents_only():
    same = {n: v * 1.5 for n, v in TF.items()}  # a constant factor: the same exponent
    s = separation("TF", TF, "X", same)
    assert s.basis == "exponent" and s.held is False and "includes 0: no separation shown" in s.text()
    assert "median samples" not in s.text()  # no ratio table where nothing is censored


def test_a_growth_claim_keeps_its_exponent_verdict_and_shows_the_ratios():
    rnn = at_budget(TF)
    s = separation("TF", TF, "RNN", rnn, censored_b=flags(rnn, TF), x_scale="linear", axis="q")
    assert s.basis == "exponent" and s.held is None
    assert "no verdict: RNN has censored runs at its smallest q = 8" in s.text()


def test_the_ratio_interval_is_seeded():
    a = ratio_at(8, TF[8], np.zeros(3, bool), TF[8] * 2, np.zeros(3, bool), seed=1)
    b = ratio_at(8, TF[8], np.zeros(3, bool), TF[8] * 2, np.zeros(3, bool), seed=1)
    assert a == b and a.low == pytest.approx(2.0) and a.ci[0] <= 2.0 <= a.ci[1]


@pytest.mark.parametrize("seed", range(20))
def test_vectorised_kaplan_meier_medians_equal_the_plain_one(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 8))
    values = rng.integers(1, 10, size=(50, n)).astype(float)
    censored = rng.random((50, n)) < 0.4
    if seed % 2:  # one budget: every censored run at the largest value
        values[censored] = 10.0
    got = km_medians(values, censored)
    want = np.array([km_median(v, c) for v, c in zip(values, censored)])
    assert np.array_equal(got, want)
