"""Paper B's claims can fail: each is fed a result that should fail it."""
import numpy as np
import pytest

from archsep.analysis.stats import fit_exponent
from archsep.experiments import EXPERIMENTS

Ns = (25, 27, 29, 31, 33)


def samples(alpha: float, spread: float = 0.1, seeds: int = 5, seed: int = 0) -> dict[int, np.ndarray]:
    """Samples ~ N^alpha over Figure 1b's lengths, with log-normal noise per run."""
    rng = np.random.default_rng(seed)
    return {N: 1e5 * (N / 25) ** alpha * np.exp(rng.normal(0, spread, seeds)) for N in Ns}


def flat_claim(alpha: float, spread: float = 0.1):
    exp = EXPERIMENTS.get("qstr-fig1b")()
    [claim] = [c for c in exp.growth_claims({"TF": fit_exponent(samples(alpha, spread)).to_dict()})]
    return claim


def test_a_flat_transformer_holds_the_flat_claim():
    assert flat_claim(0.0).held


@pytest.mark.parametrize("alpha", [2.0, 4.0])
def test_a_steep_transformer_fails_the_flat_claim(alpha):
    claim = flat_claim(alpha)
    assert not claim.held and "lies below 1" in claim.text


def test_a_flat_claim_whose_interval_is_too_wide_to_tell_does_not_hold():
    """Noise so large that the interval reaches above 1: not 'held' (the old rule, 'reaches down to
    0.5', held here whatever the truth)."""
    claim = flat_claim(0.0, spread=1.0)
    lo, hi = claim.values["ci"]
    assert lo < 0.5 < 1.0 < hi and not claim.held


def test_a_growing_ffn_holds_and_a_flat_one_fails_the_growth_claim():
    exp = EXPERIMENTS.get("qstr-fig1b")()
    fits = {"FFN": fit_exponent(samples(4.0)).to_dict()}
    assert [c.held for c in exp.growth_claims(fits)] == [True]
    fits = {"FFN": fit_exponent(samples(0.0)).to_dict()}
    assert [c.held for c in exp.growth_claims(fits)] == [False]
