"""Paper B, Propositions 3/4: with H < q heads a one-layer Transformer stalls above
1 - H(q+d)/(qd) on the norm2 link; with H >= q heads it learns. The runs use the distribution
the floor is proved for (`distribution="prop3"`: the second half's tokens are 0 and all its
positions ask for t = (1..q); the loss and the metric are read there)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from typing import Any

import numpy as np

from ...config import RunConfig, TrainConfig
from ...results import Claim, RunResult, Summary
from ..base import EXPERIMENTS, Experiment, claim_lines, run_settings, settings_text, time_text


def heads_bound(H: int, q: int, d: int) -> float:
    """Paper B Prop. 3: with H < q heads the risk on norm2 is at least 1 - H(q+d)/(qd)
    (in units of the label variance)."""
    return max(0.0, 1.0 - H * (q + d) / (q * d)) if H < q else 0.0


@dataclass(frozen=True)
class HeadsScale:
    qs: tuple[int, ...]
    N: int
    d: int
    seeds: int
    train: dict
    mlp_width: int = 100


@EXPERIMENTS.register("qstr-heads")
class Heads(Experiment):
    description = "qSTR, norm2 link: H < q heads stall above 1 - H(q+d)/(qd), H >= q learn (paper B Prop. 3/4)"
    runtime = {"quick": "about 4-7 min (2 CPU cores)", "full": "about 38 min (2 CPU cores)"}
    common = {"lr": 1e-3, "weight_decay": 0.1, "batch_size": 64, "threshold": 0.01, "eval_mode": "every",
              "stop_at_threshold": False}
    full = HeadsScale(qs=(2, 3), N=20, d=10, seeds=3,
                      train={**common, "budget": 1_000_000, "eval_every": 100, "eval_size": 5000})
    quick = HeadsScale(qs=(2, 3), N=10, d=10, seeds=1,
                       train={**common, "budget": 256_000, "eval_every": 100, "eval_size": 2000})
    tolerance = 0.02  # held-out noise allowed when checking a floor

    def plan(self, scale: str, device: str = "auto") -> list[RunConfig]:
        s = self.scale(scale)
        train = TrainConfig(**{**s.train, "device": device})
        return [RunConfig("qstr", "tf-b", {"N": s.N, "q": q, "d": s.d, "link": "norm2", "distribution": "prop3"},
                          {"heads": H, "mlp_width": s.mlp_width}, train, seed, f"q{q}-H{H}")
                for q in s.qs for H in range(1, q + 2) for seed in range(s.seeds)]

    def analyze(self, results: list[RunResult], scale: str) -> Summary:
        s = self.scale(scale)
        # N, d and the training settings as the runs were made (a --set changes them)
        settings, notes = run_settings(results, {"N": "task_params.N", "d": "task_params.d", "budget": "train.budget",
                                                 "threshold": "train.threshold", "eval_size": "train.eval_size"},
                                       {"N": s.N, "d": s.d, "budget": int(s.train["budget"]),
                                        "threshold": s.train["threshold"], "eval_size": s.train["eval_size"],
                                        "seeds": s.seeds})
        by: dict[tuple[int, int], list[RunResult]] = defaultdict(list)
        for r in results:
            by[(r.config["task_params"]["q"], r.config["model_params"]["heads"])].append(r)
        rows: list[dict[str, Any]] = []
        for (q, H), rs in sorted(by.items()):
            d = max(int(r.config["task_params"].get("d", s.d)) for r in rs)  # the bound of these runs' d
            best = [r.best_metric for r in rs if r.best_metric is not None]
            final = [r.final_metric for r in rs if r.final_metric is not None]
            rows.append({"q": q, "H": H, "runs": len(rs), "errors": sum(r.status in ("error", "diverged") for r in rs),
                         "bound": round(heads_bound(H, q, d), 4) if H < q else None, "d": d,
                         "best_mse": float(np.mean(best)) if best else None,
                         "final_mse": float(np.mean(final)) if final else None})
        claims = []
        for q in sorted({q for q, _ in by}) or s.qs:
            few = [r for r in rows if r["q"] == q and r["H"] < q and r["best_mse"] is not None]
            many = [r for r in rows if r["q"] == q and r["H"] >= q and r["best_mse"] is not None]
            if few:
                held = all(r["best_mse"] >= r["bound"] - self.tolerance for r in few)
                claims.append(Claim("floor", f"sanity check (a theorem's lower bound, which training cannot "
                                             f"beat): q={q}: every H < q stays above its floor 1 - H(q+d)/(qd) "
                                             f"({_list(few, True)})", bool(held),
                                    {"q": q, "best_mse": {r["H"]: r["best_mse"] for r in few},
                                     "bound": {r["H"]: r["bound"] for r in few}}))
            if few and many:
                floor = min(r["best_mse"] for r in few)
                held = all(r["best_mse"] < floor - self.tolerance for r in many)
                claims.append(Claim("ordering", f"q={q}: every H >= q learns below the best H < q run ({floor:.3f}): "
                                                f"{_list(many, False)}", bool(held),
                                    {"q": q, "floor": floor, "best_mse": {r["H"]: r["best_mse"] for r in many}}))
            for row in many:  # information, not a claim: a budget-limited run may still be above it
                row["below_q-1_head_floor"] = bool(row["best_mse"] < heads_bound(q - 1, q, row["d"]))
        data = {**settings, "rows": rows, "notes": notes}
        return Summary(self.registry_name, scale, data, claims, results)

    def figures(self, summary: Summary, out: Path) -> list[Path]:
        from ...reporting.plots import save

        return save(self.draw(summary), out / "figure")

    def draw(self, summary: Summary):
        """One panel per q: every run's held-out MSE against samples, one colour per head count
        H, with the Prop. 3 floor of each H < q dashed; legends below the panels."""
        from ...reporting.plots import plain, plt

        rows, d = summary.data["rows"], summary.data["d"]
        qs = sorted({r["q"] for r in rows})
        fig, axes = plt.subplots(1, max(1, len(qs)), figsize=(5 * max(1, len(qs)), 4.4), squeeze=False,
                                 layout="constrained")
        for ax, q in zip(axes[0], qs):
            for H in range(1, q + 2):
                rs = [r for r in summary.results
                      if r.config["task_params"]["q"] == q and r.config["model_params"]["heads"] == H]
                for i, r in enumerate(rs):
                    if r.curve:
                        ax.plot(*zip(*r.curve), color=f"C{H - 1}", alpha=0.9, label=f"H={H}" if i == 0 else None)
                if H < q:
                    dd = next((r["d"] for r in rows if r["q"] == q and r["H"] == H), d)
                    dd = dd if isinstance(dd, int) else max(dd)
                    ax.axhline(heads_bound(H, q, dd), color=f"C{H - 1}", ls="--", lw=1,
                               label=f"floor H={H}: {heads_bound(H, q, dd):.2f}")
            ax.set_title(f"q={q}, norm2, N={summary.data['N']}, d={d}")
            ax.set_xlabel("samples")
            ax.set_ylabel("held-out MSE")
            ax.set_ylim(0, 1.1)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)  # outside the data
        fig.suptitle(plain(f"{summary.experiment} ({summary.scale}): held-out MSE against samples, every run; "
                           "dashed: the floor of H < q heads (Prop. 3)"), fontsize=9)
        return fig

    def text(self, summary: Summary) -> str:
        s = summary.data
        lines = [f"{summary.experiment} ({summary.scale}): "
                 f"{settings_text(s, {'N': 'N', 'd': 'd', 'budget': 'budget'})} "
                 f"({s['seeds']} seed(s)); {time_text(summary)}",
                 f"  {'q':>2} {'H':>2} {'best MSE':>9} {'final MSE':>10} {'floor (H<q)':>12} "
                 f"{'below (q-1)-head floor':>23}"]
        for r in s["rows"]:
            b = "-" if r["bound"] is None else f"{r['bound']:.3f}"
            bm = "n/a" if r["best_mse"] is None else f"{r['best_mse']:.3f}"
            fm = "n/a" if r["final_mse"] is None else f"{r['final_mse']:.3f}"
            below = {True: "yes", False: "no", None: "-"}[r.get("below_q-1_head_floor")]
            lines.append(f"  {r['q']:>2} {r['H']:>2} {bm:>9} {fm:>10} {b:>12} {below:>23}")
        return "\n".join(lines + claim_lines(summary.claims))


def _list(rows: list[dict], with_bound: bool) -> str:
    return ", ".join(f"H={r['H']}: {r['best_mse']:.3f}" + (f" vs {r['bound']:.3f}" if with_bound else "") for r in rows)
