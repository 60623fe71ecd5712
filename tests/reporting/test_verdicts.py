"""The report's verdict column says what the separation statement decided: a claim made in
samples because an arm's exponent is unidentified (its `blocked` says why) is held where its
bound shows the separation, not "no verdict"."""
import numpy as np

from archsep.analysis.separation import separation
from archsep.reporting.report import verdict


def test_a_separation_held_in_samples_reads_held_in_the_report():
    tf = {10: np.array([16_000.0, 17_600, 19_200]), 20: np.array([52_800.0, 56_000, 59_200])}
    mixer = {n: np.full(3, 64_000.0) for n in tf}  # censored at the budget everywhere
    s = separation("TF", tf, "minGRU", mixer, censored_b={n: np.ones(3, bool) for n in tf}).to_dict()
    assert s["blocked"] and s["held"] is True and verdict(s) == "held"
    both = separation("TF", mixer, "X", mixer, censored_a={n: np.ones(3, bool) for n in tf},
                      censored_b={n: np.ones(3, bool) for n in tf}).to_dict()
    assert verdict(both) == "no verdict"
