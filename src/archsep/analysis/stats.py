"""Statistics over seeds that handle right-censored runs honestly.

- Kaplan-Meier median: censored runs count as "at least the budget"; when fewer than half the
  runs reached the threshold, the median is not estimable and is reported as "> budget".
- Bootstrap percentile CIs with an explicit seed.
- Scaling exponent of samples ~ N^alpha by least squares on log-log, with a bootstrap CI that
  resamples seeds within each N.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def km_median(values: np.ndarray, censored: np.ndarray) -> float:
    """Kaplan-Meier median of right-censored sample counts; inf when not reached."""
    order = np.lexsort((censored, values))  # events before censorings at ties
    v, c = values[order], censored[order]
    at_risk, surv = len(v), 1.0
    for i in range(len(v)):
        if not c[i]:
            surv *= 1.0 - 1.0 / at_risk
            if surv <= 0.5 + 1e-12:
                return float(v[i])
        at_risk -= 1
    return math.inf


def bootstrap_ci(values: np.ndarray, stat, n_boot: int = 2000, level: float = 0.95,
                 seed: int = 0, censored: np.ndarray | None = None) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    n = len(values)
    if n == 0:
        return (math.nan, math.nan)
    cens = np.zeros(n, bool) if censored is None else censored
    idx = rng.integers(0, n, size=(n_boot, n))
    stats = np.array([stat(values[i], cens[i]) for i in idx], dtype=float)
    with np.errstate(invalid="ignore"):  # inf = a median beyond the budget in that resample
        lo, hi = np.percentile(stats, [50 * (1 - level), 50 * (1 + level)])
    return (float(lo), float(hi))


@dataclass
class Point:
    arch: str
    N: int
    n_runs: int
    n_censored: int
    n_diverged: int
    n_error: int
    mean: float  # over runs with a sample count; censored runs enter at the budget (a lower bound)
    median: float  # Kaplan-Meier; inf = "> budget"
    ci: tuple[float, float]  # bootstrap CI of the mean
    median_ci: tuple[float, float]  # bootstrap CI of the Kaplan-Meier median (inf = unbounded)
    budget: int | None

    def to_dict(self) -> dict:
        return {"arch": self.arch, "N": self.N, "mean": _num(self.mean), "median": _num(self.median),
                "ci": [_num(self.ci[0]), _num(self.ci[1])],
                "median_ci": [_num(self.median_ci[0]), _num(self.median_ci[1])], "n_runs": self.n_runs,
                "n_censored": self.n_censored, "n_diverged": self.n_diverged, "n_error": self.n_error,
                "median_text": self.median_text()}

    def median_text(self) -> str:
        return f"> {self.budget}" if math.isinf(self.median) else f"{self.median:.0f}"


def _num(x: float) -> float | None:
    """JSON-safe: inf stays a string-free null, the text field says '> budget'."""
    return None if (x is None or not math.isfinite(x)) else float(x)


def summarize_point(arch: str, N: int, samples: list[int | None], status: list[str],
                    budget: int | None, seed: int = 0) -> Point:
    usable = [(s, st == "censored") for s, st in zip(samples, status) if st in ("ok", "censored") and s is not None]
    v = np.array([u[0] for u in usable], float)
    c = np.array([u[1] for u in usable], bool)
    nan = (math.nan, math.nan)
    median = km_median(v, c) if len(v) else math.nan
    mean_ci = bootstrap_ci(v, lambda a, _c: float(a.mean()), seed=seed) if len(v) else nan
    median_ci = bootstrap_ci(v, km_median, censored=c, seed=seed) if len(v) else nan
    return Point(arch, N, len(status), int(c.sum()), status.count("diverged"), status.count("error"),
                 float(v.mean()) if len(v) else math.nan, median, mean_ci, median_ci, budget)


@dataclass
class Fit:
    alpha: float
    ci: tuple[float, float]
    n_points: int
    lower_bound: bool  # some runs were censored: the data enter at the budget, alpha is then a lower bound

    def to_dict(self) -> dict:
        return {"alpha": _num(self.alpha), "ci": [_num(self.ci[0]), _num(self.ci[1])],
                "n_points": self.n_points, "censored_data": self.lower_bound}


def _slope(logN: np.ndarray, logS: np.ndarray) -> float:
    if len(np.unique(logN)) < 2:
        return math.nan
    dx = logN - logN.mean()  # closed-form least squares: the bootstraps call this thousands of times
    return float((dx * (logS - logS.mean())).sum() / (dx * dx).sum())


def fit_exponent(groups: dict[int, np.ndarray], censored: dict[int, np.ndarray] | None = None,
                 n_boot: int = 2000, seed: int = 0) -> Fit:
    """alpha in samples ~ N^alpha from per-seed sample counts at each N (all runs, censored
    ones at their budget); the CI resamples seeds within each N."""
    Ns = sorted(n for n, v in groups.items() if len(v))
    logN = np.concatenate([np.full(len(groups[n]), math.log(n)) for n in Ns]) if Ns else np.array([])
    logS = np.concatenate([np.log(groups[n]) for n in Ns]) if Ns else np.array([])
    alpha = _slope(logN, logS)
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        parts = [rng.choice(np.log(groups[n]), size=len(groups[n])) for n in Ns]
        boots.append(_slope(logN, np.concatenate(parts)))
    b = np.array(boots)
    b = b[np.isfinite(b)]
    ci = (float(np.percentile(b, 2.5)), float(np.percentile(b, 97.5))) if len(b) else (math.nan, math.nan)
    any_c = bool(censored and any(np.any(c) for c in censored.values()))
    return Fit(alpha, ci, len(Ns), any_c)


def exponent_difference(a: dict[int, np.ndarray], b: dict[int, np.ndarray], n_boot: int = 2000,
                        seed: int = 0) -> tuple[float, tuple[float, float]]:
    """alpha_b - alpha_a with a bootstrap CI (independent resampling of both)."""
    fa, fb = fit_exponent(a, n_boot=0), fit_exponent(b, n_boot=0)
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n_boot):
        da = {n: rng.choice(v, size=len(v)) for n, v in a.items() if len(v)}
        db = {n: rng.choice(v, size=len(v)) for n, v in b.items() if len(v)}
        diffs.append(fit_exponent(db, n_boot=0).alpha - fit_exponent(da, n_boot=0).alpha)
    d = np.array(diffs)
    d = d[np.isfinite(d)]
    ci = (float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))) if len(d) else (math.nan, math.nan)
    return fb.alpha - fa.alpha, ci


@dataclass
class Separation:
    """alpha_worse - alpha_better with a bootstrap CI: a separation in the scaling exponent
    holds when the CI lies above 0 and censoring cannot have produced it.

    Censored runs enter the fits at the budget, a lower bound on their true sample count. For
    the worse architecture this is conservative as long as its smallest length is uncensored
    (raising the larger lengths' values can only steepen its slope). For the better
    architecture any censored run makes its exponent unidentified, so no verdict is given."""

    better: str
    worse: str
    difference: float
    ci: tuple[float, float]
    lower_bound: bool  # censored runs entered at the budget
    blocked: str = ""  # why censoring forbids a verdict ('' = it does not)

    @property
    def excludes_zero(self) -> bool:
        lo, hi = self.ci
        return bool(math.isfinite(lo) and math.isfinite(hi) and (lo > 0 or hi < 0))

    @property
    def held(self) -> bool:
        return bool(not self.blocked and math.isfinite(self.ci[0]) and self.ci[0] > 0)

    def text(self) -> str:
        if not math.isfinite(self.difference):
            return f"alpha_{self.worse} - alpha_{self.better}: not estimable (fewer than two lengths with data)"
        lo, hi = self.ci
        verdict = ("excludes 0: the exponents differ" if self.excludes_zero else "includes 0: no separation shown")
        if self.blocked:
            note = f"; no verdict: {self.blocked}"
        elif self.lower_bound:
            note = f" (censored runs of {self.worse} enter at the budget: conservative)"
        else:
            note = ""
        return (f"alpha_{self.worse} - alpha_{self.better} = {self.difference:.2f}, "
                f"95% CI [{lo:.2f}, {hi:.2f}] {verdict}{note}")

    def to_dict(self) -> dict:
        return {"better": self.better, "worse": self.worse, "difference": _num(self.difference),
                "ci": [_num(self.ci[0]), _num(self.ci[1])], "excludes_zero": self.excludes_zero,
                "held": self.held, "censored_data": self.lower_bound, "blocked": self.blocked,
                "text": self.text()}


def separation(better: str, a: dict[int, np.ndarray], worse: str, b: dict[int, np.ndarray],
               censored: bool = False, n_boot: int = 2000, seed: int = 0,
               censored_a: dict[int, np.ndarray] | None = None,
               censored_b: dict[int, np.ndarray] | None = None) -> Separation:
    """The separation statement between two architectures' samples-vs-N data (`a` is the one
    claimed better). With per-run censoring flags the verdict accounts for censoring (see
    `Separation`); `censored` alone only flags it."""
    d, ci = exponent_difference(a, b, n_boot=n_boot, seed=seed)
    blocked = ""
    ca = {n: np.asarray(c, bool) for n, c in (censored_a or {}).items()}
    cb = {n: np.asarray(c, bool) for n, c in (censored_b or {}).items()}
    censored_better = sorted(n for n, c in ca.items() if c.any())
    if censored_better:
        blocked = f"{better} has censored runs (at N = {', '.join(map(str, censored_better))}); raise the budget"
    elif cb and cb[min(cb)].any():
        blocked = f"{worse} has censored runs at its smallest N = {min(cb)}; raise the budget"
    lower = censored or bool(censored_better) or any(c.any() for c in cb.values())
    return Separation(better, worse, d, ci, lower, blocked)
