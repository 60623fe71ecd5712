"""Sample-complexity experiments (paper B): samples-to-threshold against N per architecture.

A figure of this kind is a subclass that names its task, its scales (`Scale`: the axis values,
seeds, architectures and training settings) and the separations it claims; see
`paper_b/fig1.py` for a complete one in a dozen lines.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..config import RunConfig, TrainConfig
from ..analysis.stats import fit_exponent, separation, summarize_point
from ..results import Claim, RunResult, Summary
from .base import Experiment, claim_lines, run_settings, settings_text

RUN_COLUMNS = ["arch", "N", "seed", "samples", "censored", "diverged", "status", "resolution",
               "wall_s", "params", "state_size", "best_metric", "run_id"]


@dataclass(frozen=True)
class Arch:
    label: str  # e.g. "TF"
    arch: str  # registry name
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Scale:
    """One version (full or quick) of a sample-complexity figure."""

    Ns: tuple[int, ...]
    seeds: int
    archs: tuple[Arch, ...]
    train: dict
    task_params: dict = field(default_factory=dict)
    # held-out protocols, each a copy of every arm: "training" (ours) and/or "as-published"
    # (labelled "<label> [as published]")
    protocols: tuple[str, ...] = ("training",)


AS_PUBLISHED = " [as published]"


def protocol_label(label: str, protocol: str) -> str:
    return label + (AS_PUBLISHED if protocol == "as-published" else "")


# the settings a summary reads from its runs: name -> config field
SETTINGS = {"budget": "train.budget", "threshold": "train.threshold", "eval_size": "train.eval_size"}
SETTING_NAMES = {"budget": "budget", "threshold": "threshold", "eval_size": "eval size"}


def _largest(v):
    """One value of a setting the runs may disagree on (`run_settings` gives their list)."""
    return max(v) if isinstance(v, list) and v else v


# "flat": the exponent's 95% interval lies below this (at most linear growth). A bound from above
# can fail; "the interval reaches down to 0.5" could not, over a narrow range of N (Figure 1b's
# N = 25..33 gives intervals about +-0.9 wide at 5 seeds, so almost any result reached 0.5)
FLAT_ALPHA = 1.0


def describe_runs(results: list[RunResult]) -> dict:
    """What the figures call things: each label's model ("RNN" -> "GRU-500") and the task's
    metric ("MSE", "error")."""
    names, metric = {}, None
    for r in results:
        lab = (r.config.get("label") or r.config["arch"]).replace(AS_PUBLISHED, "")
        if lab not in names or metric is None:
            try:
                cfg = RunConfig.from_dict(r.config)
                names.setdefault(lab, cfg.model_config().short_name())
                metric = metric or cfg.build_task().metric_name
            except Exception:  # noqa: BLE001 - a plugin not importable here: no names, not a failure
                pass
    return {"names": names, "metric": metric or "metric"}  # a task not importable here: no name


def run_rows(results: list[RunResult]) -> list[dict]:
    rows = []
    for r in results:
        c = r.config
        rows.append({"arch": c.get("label") or c["arch"], "N": c["task_params"].get("N"), "seed": c["seed"],
                     "samples": r.samples, "censored": r.censored, "diverged": r.diverged,
                     "status": r.status, "resolution": r.resolution, "wall_s": round(r.wall_s, 3),
                     "params": r.params, "state_size": r.state_size, "best_metric": r.best_metric,
                     "run_id": r.run_id})
    return rows


class SampleComplexityExperiment(Experiment):
    task: str = "qstr"
    full: Scale
    quick: Scale
    # (better, worse): claim that `better`'s exponent is smaller than `worse`'s
    separations: tuple[tuple[str, str], ...] = (("TF", "FFN"),)
    published: dict[str, dict[int, float]] = {}  # label -> {N: published mean samples}
    # (labels, lengths, factor): claim that these arms' means under the authors' held-out
    # protocol are within `factor` of the published means at these lengths
    matches_published: tuple | None = None
    axis: str = "N"  # the task parameter the figure varies (its values are Scale.Ns)
    flat: tuple[str, ...] = ()  # labels whose exponent's CI should lie below FLAT_ALPHA (no more than linear)
    growing: tuple[str, ...] = ()  # labels whose exponent's CI should lie above 0

    def model_params(self, arch: Arch, x: int) -> dict:
        """The model's parameters at axis value x (an experiment may tie them to it, e.g. heads = q)."""
        return dict(arch.params)

    def plan(self, scale: str, device: str = "auto") -> list[RunConfig]:
        s = self.scale(scale)
        out = []
        for protocol in s.protocols:
            train = TrainConfig(**{**s.train, "device": device, "heldout": protocol})
            out += [RunConfig(self.task, a.arch, {**s.task_params, self.axis: x}, self.model_params(a, x), train,
                              seed, protocol_label(a.label, protocol))
                    for a in s.archs for x in s.Ns for seed in range(s.seeds)]
        return out

    def groups(self, results: list[RunResult]) -> dict[str, dict[int, list[RunResult]]]:
        g: dict[str, dict[int, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
        for r in results:
            g[r.config.get("label") or r.config["arch"]][r.config["task_params"][self.axis]].append(r)
        return g

    def analyze(self, results: list[RunResult], scale: str) -> Summary:
        s = self.scale(scale)
        g = self.groups(results)
        # what the runs were made with (a --set changes them), not the preset's defaults
        settings, notes = run_settings(results, SETTINGS, {
            "budget": int(s.train.get("budget", TrainConfig().budget)),
            "threshold": float(s.train.get("threshold", TrainConfig().threshold)),
            "eval_size": int(s.train.get("eval_size", TrainConfig().eval_size)), "seeds": s.seeds})
        budget = _largest(settings["budget"])
        self.settings = settings  # for claims that name a setting (e.g. Figure 3's threshold)
        points, fits, samples, censored = [], {}, {}, {}
        for arch, byN in g.items():
            samples[arch] = {}
            cens = censored[arch] = {}
            for N in sorted(byN):
                rs = byN[N]
                point_budget = max((int(b) for r in rs if (b := (r.config.get("train") or {}).get("budget"))),
                                   default=budget)  # a point's runs share it
                points.append(summarize_point(arch, N, [r.samples for r in rs], [r.status for r in rs],
                                              point_budget).to_dict())
                ok = [r for r in rs if r.status in ("ok", "censored")]
                samples[arch][N] = np.array([r.samples for r in ok], float)
                cens[N] = np.array([r.censored for r in ok], bool)
            fits[arch] = fit_exponent(samples[arch], cens).to_dict()
        claims = self.claims(points, fits, samples, budget, censored) + self.growth_claims(fits)
        Ns = sorted({r.config["task_params"][self.axis] for r in results}) or list(s.Ns)
        data = {**settings, "Ns": Ns, "fits": fits, "points": points, "notes": notes, **describe_runs(results)}
        return Summary(self.registry_name, scale, data, claims, results)

    def claims(self, points, fits, samples, budget, censored=None) -> list[Claim]:
        out = []
        censored = censored or {}
        pairs = [(protocol_label(b, p), protocol_label(w, p)) for p in ("training", "as-published")
                 for b, w in self.separations]
        out += self._published_claims(points)
        for better, worse in pairs:
            if better not in samples or worse not in samples:
                continue
            sep = separation(better, samples[better], worse, samples[worse],
                             censored_a=censored.get(better), censored_b=censored.get(worse))
            out.append(Claim("separation", f"{better}'s exponent alpha is smaller than {worse}'s: {sep.text()}",
                             sep.held, sep.to_dict()))
            largest = max(set(samples[better]) & set(samples[worse]), default=None)
            if largest is not None:
                mb, mw = _median(points, better, largest), _median(points, worse, largest)
                out.append(Claim("ordering", f"{better} needs fewer samples than {worse} at the largest N={largest} "
                                             f"(median {_fmt(mb, budget)} vs {_fmt(mw, budget)})",
                                 bool(mb is not None and (mw is None or mb < mw)),
                                 {"N": largest, better: mb, worse: mw}))
        return out

    def growth_claims(self, fits: dict) -> list[Claim]:
        out = []
        for labels, flat in ((self.flat, True), (self.growing, False)):
            for lab in labels:
                f = fits.get(lab)
                if not f or f.get("alpha") is None or f["ci"][0] is None:
                    continue
                lo, hi = f["ci"]
                if flat:
                    out.append(Claim("exponent", f"{lab}'s samples stay flat in N: alpha = {f['alpha']:.2f}, 95% CI "
                                                 f"[{lo:.2f}, {hi:.2f}] lies below {FLAT_ALPHA:g} (it would fail for "
                                                 f"an exponent of {FLAT_ALPHA:g} or more within the interval)",
                                     bool(hi < FLAT_ALPHA), {"alpha": f["alpha"], "ci": [lo, hi], "bound": FLAT_ALPHA}))
                else:
                    out.append(Claim("exponent", f"{lab}'s samples grow with N: alpha = {f['alpha']:.2f}, 95% CI "
                                                 f"[{lo:.2f}, {hi:.2f}] lies above 0",
                                     bool(lo > 0), {"alpha": f["alpha"], "ci": [lo, hi]}))
        return out

    def _published_claims(self, points: list[dict]) -> list[Claim]:
        if not self.matches_published:
            return []
        labels, Ns, factor = self.matches_published
        mean = {(p["arch"], p["N"]): p["mean"] for p in points}
        ratios = {f"{lab} N={N}": (mean.get((protocol_label(lab, "as-published"), N)) or float("nan"))
                  / self.published[lab][N] for lab in labels for N in Ns}
        if any((protocol_label(lab, "as-published"), N) not in mean for lab in labels for N in Ns):
            return []  # a scale without those points (e.g. quick)
        held = all(1 / factor <= r <= factor for r in ratios.values())
        worst = max(ratios, key=lambda k: abs(math.log(ratios[k])) if ratios[k] > 0 else math.inf)
        return [Claim("published", f"under the authors' held-out protocol, the mean samples of {', '.join(labels)} at "
                                   f"N = {', '.join(map(str, Ns))} are within {factor}x of the published means "
                                   f"(furthest: {worst}, ratio {ratios[worst]:.2f})", held, {"ratios": ratios})]

    def figures(self, summary: Summary, out: Path) -> list[Path]:
        from ..reporting.plots import samples_vs_N

        return samples_vs_N(summary.to_dict(), out / "figure", title=self.figure_title(summary),
                            published=self.published)

    def figure_title(self, summary: Summary) -> str:
        """The preset's description, then the settings its runs were made with."""
        return f"{self.description}\nruns: {settings_text(summary.data, SETTING_NAMES)}"

    def text(self, summary: Summary) -> str:
        d = summary.to_dict()
        lines = [f"{summary.experiment} ({summary.scale}): "
                 f"{sum(p.get('n_runs', 0) for p in d['points'])} runs ({summary.wall_s or 0:.0f} s this call, runs "
                 f"the store already had included); "
                 f"{settings_text(d, SETTING_NAMES)}"]
        lines.append(f"  {'arch':<6}{'N':>4}{'mean':>10}{'median':>10}  {'mean 95% CI':<20}{'censored':>9}  published")
        for p in sorted(d["points"], key=lambda p: (p["arch"], p["N"])):
            ci = "n/a" if p["ci"][0] is None else f"[{p['ci'][0]:.0f}, {p['ci'][1]:.0f}]"
            mean = "n/a" if p["mean"] is None else f"{p['mean']:.0f}"
            pub = self.published.get(p["arch"].replace(AS_PUBLISHED, ""), {}).get(p["N"], "")
            lines.append(f"  {p['arch']:<6}{p['N']:>4}{mean:>10}{p['median_text']:>10}  {ci:<20}"
                         f"{p['n_censored']:>5}/{p['n_runs']:<3}  {pub}")
        for arch, f in d["fits"].items():
            a, ci = f["alpha"], f["ci"]
            txt = "n/a" if a is None else f"{a:.2f}"
            citxt = "" if ci[0] is None else f" (95% CI [{ci[0]:.2f}, {ci[1]:.2f}])"
            lines.append(f"  alpha[{arch}] = {txt}{citxt}"
                         f"{' (censored runs enter at the budget)' if f.get('censored_data') else ''}")
        return "\n".join(lines + claim_lines(summary.claims))


def _median(points: list[dict], arch: str, N: int) -> float | None:
    for p in points:
        if p["arch"] == arch and p["N"] == N:
            return p["median"]
    return None


def _fmt(x: float | None, budget: int) -> str:
    return f"> {budget}" if x is None else f"{x:.0f}"


def _f(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None
