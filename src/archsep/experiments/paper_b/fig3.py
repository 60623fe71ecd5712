"""Paper B, Figure 3 (camera-ready): samples to test MSE < 0.88 on the quadratic (hermite2) qSTR
at N = 7 as q grows, for the three architectures of Appendix E: a Transformer with q heads over
the whole token then a ReLU layer of width 100, a simple bidirectional RNN of hidden size 500·q
with a linear readout, an FFN of widths N·d·q and 1000; online AdamW (lr 1e-4, weight decay 0.1,
batch 64), 10,000 test samples, index tuples from [N]^q (repetition allowed, Definition 2). The
caption's claim is about the gap: "The gap increases with larger q". The axis q is carried in
the 'N' slot of the points."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import torch

from ...analysis.separation import separation
from ...results import Claim, Summary
from ...tasks.qstr import QSTR
from ..base import EXPERIMENTS, _fmt_setting, claim_lines, settings_text, time_text
from ..samples import SETTING_NAMES, Arch, SampleComplexityExperiment, Scale

TF = Arch("TF", "tf-b", {"mlp_width": 100})  # heads = q (model_params)
RNN = Arch("RNN", "rnn-b", {"cell": "tanh", "hidden_per_q": 500})  # hidden = 500 q; a simple (tanh) RNN
GRU = Arch("RNN", "rnn-b", {"cell": "gru", "hidden_per_q": 500})  # the authors' code's cell (issue 54)
FFN = Arch("FFN", "ffn", {})  # widths [N d q, 1000]: the default
TASK = {"N": 7, "d": 10, "link": "hermite2", "replace": True}
COMMON = {"lr": 1e-4, "weight_decay": 0.1, "batch_size": 64, "threshold": 0.88}


@EXPERIMENTS.register("qstr-fig3")
class Fig3(SampleComplexityExperiment):
    description = ("qSTR, hermite2 link, N=7: samples to test MSE < 0.88 as q grows; the gap between the "
                   "Transformer (H = q heads) and a bidirectional RNN (hidden 500q; 50q at the quick scale) and FFN")
    subject = "qSTR, hermite2 link (paper B, Fig. 3)"
    runtime = {"quick": "at most 22 min (2 CPU cores)", "cpu": "about 6 h on 2 cores by --dry-run (the RNN at q = 2)",
               "full": "many core-hours: the RNN of hidden 500q dominates",
               "mse05": "more than full: every arm trains further",
               "retrieval": "a GPU's: the GRU of hidden 500q at q <= 5",
               "retrieval-cpu": "hours on 2 cores (--dry-run)"}
    axis = "q"
    # a full curve point every 1000 steps (64k samples), not every 100: on the 10,000 test samples
    # the RNN of hidden 500q spent about half its training time drawing its curve (a curve point
    # never decides the first crossing: docs/sweeps.md, "The first crossing")
    full = Scale(Ns=(1, 2, 3, 4, 5), seeds=5, archs=(TF, RNN, FFN),
                 train={**COMMON, "budget": 2_000_000, "eval_size": 10_000, "curve_every": 100}, task_params=TASK)
    # mse05: the full scale with the threshold at MSE 0.5 (a diagnostic, not the paper's figure): at
    # 0.88 a model explains only 12% of the target's variance, so the gap may not show; at 0.5 most
    # of the q terms must be learned (the former TF-only design's medians grew with q there:
    # docs/results/qstr-fig3/former/mse0.5/)
    mse05 = dataclasses.replace(full, train={**full.train, "threshold": 0.5})
    # cpu: the largest range of q this machine's budget allows for the RNN of hidden 500q (a
    # step at q = 3 costs about 2.2x q = 2's, q = 5 6x: the full scale's RNN is a GPU's job,
    # 40-100 core-hours here). The budget is twice the full scale's so that no RNN run at q = 1
    # is censored (one of five was at 2M, which leaves its gap without a verdict); a run that
    # reaches the threshold is the same whatever the budget, so every arm keeps one budget
    cpu = dataclasses.replace(full, Ns=(1, 2), train={**full.train, "budget": 4_000_000})
    # retrieval (issue 54): the three-arm claim at MSE < 0.5, below the pointer-blind predictor's
    # 0.848-0.868 (so the threshold needs the pointers), with an RNN that trains. Calibrated
    # (docs/results/qstr-fig3-controls/, one seed, q = 1 unless said): at the paper's lr 1e-4 the
    # simple tanh RNN never reached 0.5 (its q >= 2 runs sat at the zero predictor's MSE); at lr 1e-3
    # the tanh RNN sat there too, while a bidirectional GRU (the authors' Figure 1 code) reached 0.5
    # at 140k samples, the Transformer at 29k (q = 2: 34k) and the FFN at 332k. So every arm trains
    # at lr 1e-3 (one rate for all: the same search), the RNN arm is the GRU of hidden 500q, and the
    # RNN (at q = 1 and 2) and the FFN (at q = 1) each have a positive control; the paper's budget
    retrieval = Scale(Ns=(1, 2, 3, 4, 5), seeds=5, archs=(TF, GRU, FFN),
                      train={**COMMON, "lr": 1e-3, "threshold": 0.5, "budget": 2_000_000, "eval_size": 10_000,
                             "curve_every": 100}, task_params=TASK)
    # retrieval-cpu: its q = 1 and 2, what 2 cores can run (q >= 3 is a GPU's: the GRU of hidden 500q)
    retrieval_cpu = dataclasses.replace(retrieval, Ns=(1, 2))
    # quick: indicative only (3 seeds, q <= 3, an RNN of hidden 50q, a smaller budget and test set)
    quick = Scale(Ns=(1, 2, 3), seeds=3,
                  archs=(TF, Arch("RNN", "rnn-b", {"cell": "tanh", "hidden_per_q": 50}), FFN),
                  train={**COMMON, "budget": 400_000, "eval_size": 2000}, task_params=TASK)
    scales = ("quick", "cpu", "full", "mse05", "retrieval", "retrieval-cpu")
    separations = ()
    gaps = ("RNN", "FFN")  # each one's gap to the TF should grow with q

    # per scale, the arms whose gap needs a positive control of their own, and at how many of the
    # smallest q: every run there reaches the threshold, or the arm did not train here and its gap
    # has no verdict (an arm censored everywhere is no evidence of a gap: issue 54)
    controlled: dict[str, dict[str, int]] = {"retrieval": {"RNN": 2, "FFN": 1}, "retrieval-cpu": {"RNN": 2, "FFN": 1}}

    def analyze(self, results, scale: str):
        self._controlled = self.controlled.get(scale, {})
        return super().analyze(results, scale)

    def arm_control(self, arm: str, points: list[dict], thr: str, n: int) -> Claim:
        """`arm` reaches MSE < thr in every run at the `n` smallest q of the preset's scale; no
        verdict while some of those q have no runs yet (e.g. `--at 1`) and none failed."""
        pts = sorted((p for p in points if p["arch"] == arm), key=lambda p: p["N"])[:n]
        cens, runs = sum(p["n_censored"] for p in pts), sum(p["n_runs"] for p in pts)
        at = " and ".join(str(p["N"]) for p in pts) or "none"
        text = (f"control: {arm} reaches MSE < {thr} in every run at its {n} smallest q (run: q = {at}; "
                f"{cens} of {runs} run(s) censored)")
        values = {"arm": arm, "qs": [p["N"] for p in pts], "censored": cens}
        if cens == 0 and len(pts) < n:
            return Claim("control", f"no verdict (not every q run yet): {text}", None, values)
        return Claim("control", text, len(pts) == n and cens == 0, values)

    def model_params(self, arch, x: int) -> dict:
        p = dict(arch.params)
        if arch.label == "TF":
            p["heads"] = x  # H = q heads, as the theory needs
        if "hidden_per_q" in p:
            p["hidden"] = p.pop("hidden_per_q") * x
        return p

    def claims(self, points, fits, samples, budget, censored=None) -> list[Claim]:
        out = []
        censored = censored or {}
        thr = _fmt_setting(getattr(self, "settings", {}).get("threshold", COMMON["threshold"]))
        tf = [p for p in points if p["arch"] == "TF"]
        if tf:  # the positive control: the arm the gaps are measured from reaches the threshold
            cens = sum(p["n_censored"] for p in tf)
            out.append(Claim("threshold", f"control: TF with H = q heads reaches MSE < {thr} at every q "
                                          f"({cens} censored run(s))", cens == 0, {"censored": cens}))
        qs = sorted({p["N"] for p in points})
        blind_ok = True
        if qs:  # the threshold against the best predictor that ignores the pointers (issue 54)
            thr_v = float(getattr(self, "settings", {}).get("threshold", COMMON["threshold"]))
            blind = pointer_blind(qs)
            blind_ok = thr_v < min(blind.values())
            out.append(Claim("baseline", f"the threshold (MSE < {thr}) lies below the MSE of the best predictor that "
                                         "ignores the index tuples (E[y | tokens], 10,000 prompts): "
                                         + ", ".join(f"q={q}: {v:.3f}" for q, v in blind.items()),
                             blind_ok, {"pointer_blind_mse": blind, "threshold": thr_v}))
        head = "" if blind_ok else "at a threshold a pointer-blind predictor meets (no retrieval needed): "
        arm_controls = {arm: self.arm_control(arm, points, thr, n)
                        for arm, n in getattr(self, "_controlled", {}).items() if arm in samples}
        out += arm_controls.values()
        for worse in self.gaps:
            if "TF" not in samples or worse not in samples:
                continue
            sep = separation("TF", samples["TF"], worse, samples[worse], censored_a=censored.get("TF"),
                             censored_b=censored.get(worse), x_scale="linear", axis="q")
            low = {q for q, c in censored.get(worse, {}).items() if np.any(c)}  # a mean at the budget: a bound
            ratio = _ratios(samples["TF"], samples[worse])
            ratios = ", ".join(f"q={q}: {'>= ' if q in low else ''}{r:.2f}" for q, r in ratio.items())
            text = f"{head}the {worse}/TF gap grows with q: {sep.text()} (ratio of means {ratios})"
            control = arm_controls.get(worse)
            if control is not None and control.held is False:  # the arm did not train: its gap says nothing
                out.append(Claim("gap", f"no verdict: {worse} did not train here ({control.text}); {text}", None,
                                 {**sep.to_dict(), "ratios": ratio, "control": False}))
                continue
            out.append(Claim("gap", text, sep.held, {**sep.to_dict(), "ratios": ratio}))
        return out

    def figures(self, summary: Summary, out: Path) -> list[Path]:
        from ...reporting.plots import save

        return save(self.draw(summary), out / "figure")

    def draw(self, summary: Summary):
        """Left: every run's samples to the threshold (censored: open triangles at the budget)
        and each arm's mean against q; right: each arm's ratio of means to the TF's, with a 95%
        bootstrap interval. Only arms with runs (`summary.results`) are drawn and named; the
        legends lie below their panels, outside the data."""
        from ...reporting.plots import plain, plt

        fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.6, 4.4), layout="constrained")
        tf = _by_q(summary, "TF")
        for k, lab in enumerate(("TF", "RNN", "FFN")):
            runs = [r for r in summary.results if (r.config.get("label") or r.config["arch"]) == lab]
            if not runs:  # an arm not run (yet: --only): no legend entry for lines that are not drawn
                continue
            for r in runs:
                ax.plot(r.config["task_params"]["q"], r.samples if r.samples else float("nan"),
                        "^" if r.censored else "o", color=f"C{k}", alpha=0.4, mfc="none" if r.censored else f"C{k}")
            pts = sorted((p for p in summary.data["points"] if p["arch"] == lab and p["mean"] is not None),
                         key=lambda p: p["N"])
            ax.plot([p["N"] for p in pts], [p["mean"] for p in pts], "-", marker="_", ms=14, color=f"C{k}",
                    label=f"{lab}, mean")  # the tick shows a mean at a q with no neighbour to join
            if lab != "TF":
                by_q = _by_q(summary, lab)
                ratio = _ratios(tf, by_q)
                qs = list(ratio)
                cis = [_ratio_ci(tf[q], by_q[q]) for q in qs]
                bx.errorbar(qs, [ratio[q] for q in qs],
                            yerr=[[ratio[q] - c[0] for q, c in zip(qs, cis)],
                                  [c[1] - ratio[q] for q, c in zip(qs, cis)]],
                            marker="o", capsize=3, color=f"C{k}", label=f"{lab} / TF")
                cut = {r.config["task_params"]["q"] for r in runs if r.censored}
                low = [q for q in qs if q in cut]
                if low:  # censored runs enter at the budget: the ratio there is a lower bound
                    bx.plot(low, [ratio[q] for q in low], "^", ms=11, mfc="none",
                            color=f"C{k}", label=f"{lab} / TF with censored runs (a lower bound)")
        qs_all = sorted({p["N"] for p in summary.data["points"]})
        for a in (ax, bx):
            a.set_xticks(qs_all)
        ax.set_xlabel("q (tokens per label)")
        ax.set_ylabel(f"samples to MSE < {_fmt_setting(summary.data['threshold'])}")
        ax.set_yscale("log")
        if any(r.censored for r in summary.results):
            ax.scatter([], [], marker="^", facecolors="none", edgecolors="k", label="censored run (at the budget)")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)  # below, outside the data
        bx.set_xlabel("q")
        bx.set_ylabel("ratio of mean samples (95% bootstrap CI)")
        bx.set_yscale("log")
        bx.axhline(1, color="grey", lw=0.8, ls="--")
        if bx.get_legend_handles_labels()[0]:
            bx.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1)
        fig.suptitle(plain(self.figure_title(summary)), fontsize=8)
        return fig

    def text(self, summary: Summary) -> str:
        lines = [f"{summary.experiment} ({summary.scale}): {time_text(summary)}; "
                 f"{settings_text(summary.data, SETTING_NAMES)}",
                 f"  {'arch':<5}{'q':>2} {'median':>10} {'mean':>10} {'censored':>9}"]
        for p in sorted(summary.data["points"], key=lambda p: (p["arch"], p["N"])):
            mean = "n/a" if p["mean"] is None else f"{p['mean']:.0f}"
            lines.append(f"  {p['arch']:<5}{p['N']:>2} {p['median_text']:>10} {mean:>10} "
                         f"{p['n_censored']:>5}/{p['n_runs']}")
        return "\n".join(lines + claim_lines(summary.claims))


def pointer_blind(qs: list[int], n: int = 10_000, seed: int = 0) -> dict[int, float]:
    """Per q, the test MSE of the best predictor that ignores the index tuples on the figure's
    task (`QSTR.pointer_blind_mse`, `n` prompts drawn from `seed`)."""
    task = QSTR(**TASK)  # type: ignore[arg-type]  # the figure's task, its fields as the runs have them
    return {q: dataclasses.replace(task, q=q).pointer_blind_mse(n, torch.Generator().manual_seed(seed)) for q in qs}


def _by_q(summary: Summary, label: str) -> dict[int, np.ndarray]:
    out: dict[int, list[float]] = {}
    for r in summary.results:
        if (r.config.get("label") or r.config["arch"]) == label and r.samples and r.status in ("ok", "censored"):
            out.setdefault(r.config["task_params"]["q"], []).append(float(r.samples))
    return {q: np.array(v) for q, v in out.items()}


def _ratios(tf: dict, other: dict) -> dict[int, float]:
    """Ratio of mean samples (other / TF) at each q both have."""
    return {q: float(np.mean(other[q]) / np.mean(tf[q])) for q in sorted(set(tf) & set(other))
            if len(tf[q]) and len(other[q]) and np.mean(tf[q]) > 0}


def _ratio_ci(tf: np.ndarray, other: np.ndarray, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 95% bootstrap interval of mean(other) / mean(tf), resampling each arm's runs."""
    if len(tf) < 2 or len(other) < 2:
        r = float(np.mean(other) / np.mean(tf))
        return (r, r)
    rng = np.random.default_rng(seed)
    a = tf[rng.integers(0, len(tf), (n_boot, len(tf)))].mean(1)
    b = other[rng.integers(0, len(other), (n_boot, len(other)))].mean(1)
    lo, hi = np.percentile(b / a, [2.5, 97.5])
    return (float(lo), float(hi)) if math.isfinite(lo) and math.isfinite(hi) else (math.nan, math.nan)
