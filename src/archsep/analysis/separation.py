"""The one statement of whether architecture `better` needs fewer samples than `worse`, from
their samples to the threshold at each N (a censored run enters at its budget: a lower bound).
Every separation claim (presets, sweeps' `[analysis]`, the atlas) goes through `separation`.

Which statement the data support depends on censoring:

- **No censored run in either arm**: the exponents of samples ~ N^alpha are compared
  (alpha_worse - alpha_better with a Welch t interval over per-seed slopes). Held when the
  interval lies above 0; did not hold otherwise (both arms were measured at every N).
- **Censored runs**: an exponent fitted through runs at the budget is only a bound. When the
  only censored runs are the worse arm's above its smallest N, its exponent is a lower bound
  and a positive interval still shows the separation. Otherwise the statement is made in
  samples, per N: the ratio of median samples worse / better (`Ratio`), with each arm's
  censored runs on the side that can only weaken the statement, so a censored worse arm gives
  a lower bound ("needs more than 3.3x the TF's samples"). The verdict rests on the largest N
  where either arm reached the threshold (a separation in scaling may cross over at small N):
  held when there the ratio's 95% lower bound exceeds 1; did not hold when the data speak
  against the claim there (the better arm needs more samples: the upper bound lies below 1,
  or both arms reached the threshold with a ratio whose interval includes 1); no verdict when
  the bounds neither show nor contradict it (raise the budget), or when neither arm reached
  the threshold anywhere.

A growth statement (`x_scale="linear"`: the gap grows with q) is about exponents only: the
ratios are attached for the reader, its verdict is the exponent route's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .stats import MIN_SEEDS, _num, exponent_difference, km_median, seed_slopes

N_BOOT = 2000


def km_medians(values: np.ndarray, censored: np.ndarray) -> np.ndarray:
    """The Kaplan-Meier median of each row of (resamples, runs); inf where it is not reached.
    Runs censored at a budget no smaller than any event (the usual case: one budget) make it
    the ceil(n/2)-th smallest value when that is an event; otherwise row by row."""
    values, censored = np.atleast_2d(values), np.atleast_2d(censored)
    events = values[~censored]
    if censored.any() and events.size and values[censored].min() < events.max():
        return np.array([km_median(v, c) for v, c in zip(values, censored)])
    order = np.lexsort((censored, values), axis=1)  # events before censorings at ties
    rows = np.arange(values.shape[0])
    m = math.ceil(values.shape[1] / 2) - 1
    at = order[:, m]
    return np.where(censored[rows, at], math.inf, values[rows, at]).astype(float)


@dataclass(frozen=True)
class Ratio:
    """worse / better median samples at one x. `low` enters the worse arm's censored runs at
    the budget and leaves the better arm's unknown (its median inf when most are censored): a
    lower bound; `high` the other way round: an upper bound (inf when most of the worse arm's
    runs are censored). Equal when neither arm has censored runs. `ci` = (2.5% point of `low`,
    97.5% point of `high`) over seeded bootstrap resamples of each arm's runs."""

    x: float
    low: float
    high: float
    ci: tuple[float, float]
    better_reached: bool  # the better arm's Kaplan-Meier median is finite
    worse_reached: bool
    runs: int  # the fewer runs of the two arms at x

    @property
    def kind(self) -> str:
        """'support' (lower bound > 1), 'against' (upper bound < 1), 'even' (both reached, the
        interval includes 1), 'open' (a censored arm leaves it undecided), 'none' (neither
        reached, or fewer than two runs)."""
        if self.runs < 2 or not (self.better_reached or self.worse_reached):
            return "none"
        if self.ci[0] > 1:
            return "support"
        if self.ci[1] < 1:
            return "against"
        return "even" if self.better_reached and self.worse_reached else "open"

    def text(self, axis: str = "N") -> str:
        head = f"{axis}={_x(self.x)}"
        if self.runs < 2:
            return f"{head}: fewer than two runs"
        if self.better_reached and self.worse_reached:
            mid = f"{self.low:.2f}x" if math.isclose(self.low, self.high) else f"{self.low:.2f}-{self.high:.2f}x"
            return f"{head}: {mid} [{self.ci[0]:.2f}, {_bound(self.ci[1])}]"
        if self.better_reached:
            return f"{head}: >= {self.low:.2f}x (95% lower bound {self.ci[0]:.2f}x)"
        if self.worse_reached:
            return f"{head}: <= {self.high:.2f}x (95% upper bound {_bound(self.ci[1])}x)"
        return f"{head}: neither reached the threshold"

    def to_dict(self) -> dict:
        return {"x": self.x, "low": _num(self.low), "high": _num(self.high),
                "ci": [_num(self.ci[0]), _num(self.ci[1])], "better_reached": self.better_reached,
                "worse_reached": self.worse_reached, "runs": self.runs, "kind": self.kind}


def _x(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _bound(v: float) -> str:
    return "inf" if math.isinf(v) else f"{v:.2f}"


def ratio_at(x: float, better: np.ndarray, cens_better: np.ndarray, worse: np.ndarray,
             cens_worse: np.ndarray, seed: int = 0, n_boot: int = N_BOOT) -> Ratio:
    """The `Ratio` of `worse`'s to `better`'s median samples at one x (runs and censored flags
    of each arm), its interval from `n_boot` resamples drawn from `seed`."""
    b, w = np.asarray(better, float), np.asarray(worse, float)
    cb, cw = np.asarray(cens_better, bool), np.asarray(cens_worse, bool)
    rng = np.random.default_rng(seed)
    ib = np.vstack([np.arange(len(b)), rng.integers(0, len(b), size=(n_boot, len(b)))])
    iw = np.vstack([np.arange(len(w)), rng.integers(0, len(w), size=(n_boot, len(w)))])
    b_hi, b_lo = km_medians(b[ib], cb[ib]), km_medians(b[ib], np.zeros_like(cb[ib]))
    w_hi, w_lo = km_medians(w[iw], cw[iw]), km_medians(w[iw], np.zeros_like(cw[iw]))
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(np.isinf(b_hi), 0.0, w_lo / b_hi)  # row 0: the data themselves
        high = w_hi / b_lo
    ci = (float(np.percentile(low[1:], 2.5, method="lower")), float(np.percentile(high[1:], 97.5, method="higher")))
    return Ratio(x, float(low[0]), float(high[0]), ci, bool(np.isfinite(b_hi[0])), bool(np.isfinite(w_hi[0])),
                 min(len(b), len(w)))


def samples_verdict(ratios: list[Ratio], better: str, worse: str, axis: str = "N") -> tuple[bool | None, str]:
    """The verdict in samples from per-x ratios (the module's rule) and its words."""
    def xs(kind: str) -> str:
        return ", ".join(_x(r.x) for r in ratios if r.kind == kind)

    informative = [r for r in ratios if r.kind != "none"]
    if not informative:
        return None, (f"no verdict: neither arm reached the threshold at any {axis} with two or more runs; "
                      "raise the budget")
    last = informative[-1]
    before = f" (below 1 at {axis} = {xs('against')})" if xs("against") else ""
    if last.kind == "support":
        return True, (f"{worse} needs more samples than {better} at {axis} = {xs('support')} (95% lower bound "
                      f"above 1){before}: a separation in samples")
    if last.kind == "against":
        return False, f"{better} needs more samples than {worse} at {axis} = {_x(last.x)}: evidence against"
    if last.kind == "even":
        return False, (f"both reach the threshold at {axis} = {_x(last.x)} with a ratio whose interval includes 1: "
                       f"no separation in samples there")
    return None, (f"no verdict: at {axis} = {_x(last.x)} the censored runs leave a ratio of 1 possible; "
                  "raise the budget")


@dataclass
class Separation:
    """Whether `better` needs fewer samples than `worse` (the module's rules): the exponent
    difference alpha_worse - alpha_better with its interval, the per-x ratios, and which of
    the two the verdict rests on (`basis`)."""

    better: str
    worse: str
    difference: float
    ci: tuple[float, float]
    lower_bound: bool  # censored runs entered at the budget
    blocked: str = ""  # why censoring leaves the exponents unidentified ('' = it does not)
    seeds: int = 0  # the fewest runs per point of the two
    x_scale: str = "log"  # "linear": the difference of growth rates of log samples in N (a growing gap)
    axis: str = "N"
    ratios: tuple[Ratio, ...] = ()

    @property
    def excludes_zero(self) -> bool:
        lo, hi = self.ci
        return bool(math.isfinite(lo) and math.isfinite(hi) and (lo > 0 or hi < 0))

    @property
    def reversed(self) -> bool:
        """The interval lies below 0 and no censored run of the worse arm entered it at the
        budget (with one, its exponent is only a lower bound: a reversal is not shown)."""
        return bool(math.isfinite(self.ci[1]) and self.ci[1] < 0 and not self.lower_bound)

    @property
    def exponent_held(self) -> bool | None:
        """The exponent route alone: True shown, False not shown, None unidentified."""
        if self.blocked or not math.isfinite(self.difference):
            return None
        return bool(math.isfinite(self.ci[0]) and self.ci[0] > 0)

    @property
    def basis(self) -> str:
        """'exponent', or 'samples' where censored runs leave the exponents short of a verdict."""
        if self.x_scale == "log" and self.lower_bound and self.ratios and self.exponent_held is not True:
            return "samples"
        return "exponent"

    @property
    def held(self) -> bool | None:
        """True: shown; False: not shown with both arms measured, or the data speak against it;
        None: the data cannot decide."""
        if self.basis == "samples":
            return samples_verdict(list(self.ratios), self.better, self.worse, self.axis)[0]
        return self.exponent_held

    def text(self) -> str:
        exponent = self._exponent_text()
        if self.basis == "samples":
            why = (self.blocked.removesuffix("; raise the budget")
                   or f"{self.worse}'s censored runs make its exponent a lower bound")
            ratios = "; ".join(r.text(self.axis) for r in self.ratios)
            verdict = samples_verdict(list(self.ratios), self.better, self.worse, self.axis)[1]
            return (f"{self._numbers()} (exponents not compared: {why}); "
                    f"ratio of median samples, {self.worse} to {self.better}: {ratios}: {verdict}")
        if self.lower_bound and self.ratios and self.x_scale == "log":
            return (f"{exponent}; ratio of median samples, {self.worse} to {self.better}: "
                    + "; ".join(r.text(self.axis) for r in self.ratios))
        return exponent

    def _head(self) -> str:
        return (f"d/d{self.axis} log({self.worse}/{self.better} samples)" if self.x_scale == "linear"
                else f"alpha_{self.worse} - alpha_{self.better}")

    def _numbers(self) -> str:
        """The difference and its interval, without a verdict."""
        if not math.isfinite(self.difference):
            return f"{self._head()}: not estimable"
        lo, hi = self.ci
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return f"{self._head()} = {self.difference:.2f}, no interval"
        return f"{self._head()} = {self.difference:.2f}, 95% CI [{lo:.2f}, {hi:.2f}]"

    def _exponent_text(self) -> str:
        gap = self.x_scale == "linear"
        head = self._head()
        if not math.isfinite(self.difference):
            return f"{head}: not estimable (fewer than two lengths with data)"
        lo, hi = self.ci
        if not (math.isfinite(lo) and math.isfinite(hi)):  # a point with one run: no per-seed slopes
            why = f"; no verdict: {self.blocked}" if self.blocked else ""
            return (f"{head} = {self.difference:.2f}, no interval: fewer than two runs at some {self.axis} "
                    f"(a t interval needs two per-seed slopes){why}")
        if self.reversed:
            verdict = (f"lies below 0: the gap shrinks with {self.axis}" if gap
                       else f"lies below 0: reversed, {self.worse}'s exponent is the smaller")
        elif math.isfinite(hi) and hi < 0:  # below 0 only because censored runs entered at the budget
            verdict = (f"lies below 0, but censored runs enter at the budget (a lower bound): no "
                       f"{'shrinking' if gap else 'reversal'} shown")
        elif self.excludes_zero:
            verdict = (f"lies above 0: the gap grows with {self.axis}" if gap
                       else f"lies above 0: {self.better}'s exponent is the smaller")
        else:
            verdict = "includes 0: no growth of the gap shown" if gap else "includes 0: no separation shown"
        if self.blocked:
            note = f"; no verdict: {self.blocked}"
        elif self.lower_bound:
            note = f" (censored runs of {self.worse} enter at the budget: conservative)"
        else:
            note = ""
        if 0 < self.seeds < MIN_SEEDS:
            note += f" ({self.seeds} seed(s) per point, fewer than {MIN_SEEDS}: a wide, approximate interval)"
        return f"{head} = {self.difference:.2f}, 95% CI [{lo:.2f}, {hi:.2f}] {verdict}{note}"

    def to_dict(self) -> dict:
        return {"better": self.better, "worse": self.worse, "difference": _num(self.difference),
                "ci": [_num(self.ci[0]), _num(self.ci[1])], "excludes_zero": self.excludes_zero,
                "reversed": self.reversed, "held": self.held, "basis": self.basis,
                "censored_data": self.lower_bound, "blocked": self.blocked, "seeds": self.seeds,
                "ratios": [r.to_dict() for r in self.ratios], "text": self.text()}


def separation(better: str, a: dict[int, np.ndarray], worse: str, b: dict[int, np.ndarray],
               censored: bool = False, censored_a: dict[int, np.ndarray] | None = None,
               censored_b: dict[int, np.ndarray] | None = None, x_scale: str = "log", axis: str = "N",
               seed: int = 0) -> Separation:
    """The one censoring-aware separation statement between two architectures' samples-vs-N
    data (`a` is the one claimed better; censored flags per x, none = every run reached)."""
    d, ci = exponent_difference(a, b, x_scale=x_scale)
    blocked = ""
    ca = {n: np.asarray(c, bool) for n, c in (censored_a or {}).items()}
    cb = {n: np.asarray(c, bool) for n, c in (censored_b or {}).items()}
    censored_better = sorted(n for n, c in ca.items() if c.any())
    if censored_better:
        blocked = f"{better} has censored runs (at {axis} = {', '.join(map(str, censored_better))}); raise the budget"
    elif cb and cb[min(cb)].any():
        blocked = f"{worse} has censored runs at its smallest {axis} = {min(cb)}; raise the budget"
    lower = censored or bool(censored_better) or any(c.any() for c in cb.values())
    seeds = min(len(seed_slopes(a)), len(seed_slopes(b)))
    ratios = tuple(ratio_at(x, a[x], ca.get(x, np.zeros(len(a[x]), bool)), b[x],
                            cb.get(x, np.zeros(len(b[x]), bool)), seed=seed)
                   for x in sorted(set(a) & set(b)) if len(a[x]) and len(b[x]))
    return Separation(better, worse, d, ci, lower, blocked, seeds, x_scale, axis, ratios)
