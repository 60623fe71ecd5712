import math

import numpy as np

from archsep.analysis.stats import bootstrap_ci, exponent_difference, fit_exponent, km_median, summarize_point


def test_km_median_without_censoring_is_the_lower_median():
    assert km_median(np.array([5.0, 1, 3]), np.zeros(3, bool)) == 3
    assert km_median(np.array([4.0, 1, 3, 2]), np.zeros(4, bool)) == 2


def test_km_median_counts_censored_runs_as_at_least_the_budget():
    v = np.array([10.0, 20, 100, 100, 100])
    c = np.array([False, False, True, True, True])
    assert math.isinf(km_median(v, c))  # only 2 of 5 reached: the median is "> budget"
    c2 = np.array([False, False, False, True, True])
    v2 = np.array([10.0, 20, 30, 100, 100])
    assert km_median(v2, c2) == 30
    # dropping censored runs would have said 20: censoring must not be silently ignored
    assert km_median(v2[~c2], c2[~c2]) == 20


def test_summarize_point_reports_censoring_and_budget_text():
    p = summarize_point("TF", 4, [100, None, 500, 500], ["ok", "error", "censored", "censored"], budget=500)
    d = p.to_dict()
    assert d["n_censored"] == 2 and d["n_error"] == 1 and d["n_runs"] == 4
    assert d["median"] is None and d["median_text"] == "> 500"


def test_fit_exponent_recovers_a_known_power_law_with_a_ci_covering_it():
    rng = np.random.default_rng(0)
    groups = {N: 1000 * N ** 1.0 * np.exp(rng.normal(0, 0.1, 5)) for N in (2, 4, 8, 16)}
    f = fit_exponent(groups)
    assert abs(f.alpha - 1.0) < 0.1 and f.ci[0] < 1.0 < f.ci[1]
    flat = {N: 1000 * np.exp(rng.normal(0, 0.1, 5)) for N in (2, 4, 8, 16)}
    d, ci = exponent_difference(flat, groups)
    assert ci[0] > 0.5  # the separation is detected


def test_bootstrap_ci_is_seeded():
    v = np.arange(10.0)
    assert bootstrap_ci(v, lambda a, c: a.mean(), seed=1) == bootstrap_ci(v, lambda a, c: a.mean(), seed=1)
