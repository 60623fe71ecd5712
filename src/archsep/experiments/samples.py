"""Sample-complexity experiments (paper B): samples-to-threshold against N per architecture.

A figure of this kind is a subclass that names its task, its scales (`Scale`: the axis values,
seeds, architectures and training settings) and the separations it claims; see
`paper_b/fig1.py` for a complete one in a dozen lines.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import ClassVar
from pathlib import Path


from ..analysis.grid import describe_runs, fit_grid, group, label_key, point_arm
from ..analysis.separation import separation
from ..config import PROTOCOL_SUFFIX, RunConfig, TrainConfig, arm_of
from ..results import Claim, RunResult, Summary
from .base import Experiment, _fmt_setting, claim_lines, run_settings, settings_text, time_text

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
    # the arms that get the "as-published" copy (None: every arm, when that protocol is listed)
    as_published: tuple[str, ...] | None = None
    # the arms that are the published model, so the figure draws the published means beside
    # them (None: every arm); e.g. a quick GRU-64 is not the published GRU-500
    published_models: tuple[str, ...] | None = None
    # a scale too small for a verdict at the paper's strength (few seeds, short N): its claims say so
    indicative: str = ""


def protocol_label(label: str, protocol: str) -> str:
    return label + PROTOCOL_SUFFIX[protocol]


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


class SampleComplexityExperiment(Experiment):
    task: str = "qstr"
    full: Scale
    quick: Scale
    # (better, worse): claim that `better`'s exponent is smaller than `worse`'s
    separations: ClassVar[tuple[tuple[str, str], ...]] = (("TF", "FFN"),)
    published: dict[str, dict[int, float]] = {}  # label -> {N: published mean samples}
    # (labels, lengths, factor): claim that these arms' means under the authors' held-out
    # protocol are within `factor` of the published means at these lengths
    matches_published: tuple | None = None
    axis: ClassVar[str] = "N"  # the task parameter the figure varies (its values are Scale.Ns)
    flat: tuple[str, ...] = ()  # labels whose exponent's CI should lie below FLAT_ALPHA (no more than linear)
    growing: tuple[str, ...] = ()  # labels whose exponent's CI should lie above 0
    subject: ClassVar[str] = ""  # what the figure measures, in its title (e.g. "1STR, linear link (paper B, Fig. 1a)")

    def model_params(self, arch: Arch, x: int) -> dict:
        """The model's parameters at axis value x (an experiment may tie them to it, e.g. heads = q)."""
        return dict(arch.params)

    def plan(self, scale: str, device: str = "auto") -> list[RunConfig]:
        s = self.scale(scale)
        out = []
        for protocol in s.protocols:
            train = TrainConfig(**{**s.train, "device": device, "heldout": protocol})
            archs = [a for a in s.archs if protocol != "as-published" or s.as_published is None
                     or a.label in s.as_published]
            out += [RunConfig(self.task, a.arch, {**s.task_params, self.axis: x}, self.model_params(a, x), train,
                              seed, protocol_label(a.label, protocol))
                    for a in archs for x in s.Ns for seed in range(s.seeds)]
        return out

    def groups(self, results: list[RunResult]) -> dict:
        """{curve (label, protocol): {axis value: runs}}."""
        return group(results, label_key, lambda r: r.config["task_params"][self.axis])

    def analyze(self, results: list[RunResult], scale: str) -> Summary:
        s = self.scale(scale)
        # what the runs were made with (a --set changes them), not the preset's defaults
        settings, notes = run_settings(results, SETTINGS, {
            "budget": int(s.train.get("budget", TrainConfig().budget)),
            "threshold": float(s.train.get("threshold", TrainConfig().threshold)),
            "eval_size": int(s.train.get("eval_size", TrainConfig().eval_size)), "seeds": s.seeds})
        budget = _largest(settings["budget"])
        self.settings = settings  # for claims that name a setting (e.g. Figure 3's threshold)
        grid = fit_grid(self.groups(results), budget)
        claims = self.claims(grid.points, grid.fits, grid.samples, budget,
                             grid.censored) + self.growth_claims(grid.fits)
        if s.indicative:
            claims = [dataclasses.replace(c, text=f"indicative ({s.indicative}): {c.text}") for c in claims]
        Ns = sorted({r.config["task_params"][self.axis] for r in results}) or list(s.Ns)
        data = {**settings, "Ns": Ns, "fits": grid.fits, "points": grid.points, "notes": notes,
                **describe_runs(results)}
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
            what = (f"{better}'s exponent alpha is smaller than {worse}'s" if sep.basis == "exponent"
                    else f"{better} needs fewer samples than {worse}")
            out.append(Claim("separation", f"{what}: {sep.text()}", sep.held, sep.to_dict()))
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

        models = self.scale(summary.scale).published_models
        published = {k: v for k, v in self.published.items() if models is None or k in models}
        return samples_vs_N(summary.to_dict(), out / "figure", title=self.figure_title(summary), published=published)

    def figure_title(self, summary: Summary) -> str:
        """The preset, its scale and `subject`; the threshold its runs were made with and the
        arms that have runs in the figure (not the description, which names the preset's design
        at every scale); then the runs' settings. Built from the summary's data alone."""
        d = summary.data
        run = [p for p in d.get("points") or [] if p.get("n_runs")]
        arms = {(p.get("curve") or {}).get("arm") or arm_of(p["arch"], "as-published") for p in run}
        order = [a.label for a in self.scale(summary.scale).archs] if summary.scale in self.scales else []
        shown = ", ".join(sorted(arms, key=lambda a: (order.index(a) if a in order else len(order), a))) or "none"
        suffix = PROTOCOL_SUFFIX["as-published"].strip()
        authors = (f"\n{suffix}: the same arm tested on the authors' held-out prompts"
                   if any(p["arch"].endswith(suffix) for p in run) else "")
        head = f"{summary.experiment} ({summary.scale})" + (f": {self.subject}" if self.subject else "")
        return (f"{head}\nsamples to held-out {d.get('metric') or 'MSE'} < {_fmt_setting(d.get('threshold'))} "
                f"against {self.axis}; arms run: {shown}{authors}\nruns: {settings_text(d, SETTING_NAMES)}")

    def text(self, summary: Summary) -> str:
        d = summary.to_dict()
        lines = [f"{summary.experiment} ({summary.scale}): "
                 f"{sum(p.get('n_runs', 0) for p in d['points'])} runs ({time_text(summary)}); "
                 f"{settings_text(d, SETTING_NAMES)}"]
        lines.append(f"  {'arch':<6}{'N':>4}{'mean':>10}{'median':>10}  {'mean 95% CI':<20}{'censored':>9}  published")
        for p in sorted(d["points"], key=lambda p: (p["arch"], p["N"])):
            ci = "n/a" if p["ci"][0] is None else f"[{p['ci'][0]:.0f}, {p['ci'][1]:.0f}]"
            mean = "n/a" if p["mean"] is None else f"{p['mean']:.0f}"
            arm = point_arm(p)
            models = self.scale(summary.scale).published_models
            pub = self.published.get(arm, {}).get(p["N"], "") if models is None or arm in models else ""
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

