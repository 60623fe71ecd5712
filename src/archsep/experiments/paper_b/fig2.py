"""Paper B, Figure 2: train on a fixed set of 1STR examples at N = 100 and compare the trained
W_Q W_K^T with the block that the construction of Eq. A.2 / Lemma 11 predicts (query slot
omega_{t_i} x key slot omega_j, approximately alpha * I). The engine replays the fixed set in
epochs (`train_set_size`) and records W_Q W_K^T at each curve point (`probe`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...analysis.attention import block_cosine, block_mass
from ...constructions.qstr import block_mask, construction_block_mass
from ...config import RunConfig, TrainConfig
from ...tasks.qstr import QSTR
from ...results import Claim, RunResult, Summary
from ..base import EXPERIMENTS, Experiment, claim_lines, run_settings, time_text


@dataclass(frozen=True)
class Fig2Scale:
    N: int
    train_size: int
    steps: int
    seeds: int
    log_every: int
    task: dict = field(default_factory=lambda: {"q": 1, "d": 10, "link": "linear"})
    model: dict = field(default_factory=lambda: {"heads": 1, "mlp_width": 100, "qk": "separate"})
    lr: float = 1e-3
    weight_decay: float = 0.2
    batch_size: int = 64
    test_size: int = 2000


def _qstr(cfg: RunConfig) -> QSTR:
    task = cfg.build_task()
    assert isinstance(task, QSTR)  # Figure 2's runs are qSTR runs
    return task


def _mask(cfg: RunConfig) -> torch.Tensor:
    """The predicted support of W_Q W_K^T for this run's task instance, one slab per head."""
    task = _qstr(cfg)
    mask = block_mask(task)
    heads = cfg.model_config().params().get("heads", 1)
    if heads > task.q:  # extra heads have no predicted block
        mask = torch.cat([mask, torch.zeros(heads - task.q, *mask.shape[1:], dtype=torch.bool)])
    return mask


def _initial_qk(cfg: RunConfig) -> torch.Tensor:
    """W_Q W_K^T at initialisation: the model rebuilt from the run's init seed."""
    return cfg.build_model(cfg.build_task()).qk_matrix().detach()  # type: ignore[operator]


@EXPERIMENTS.register("qstr-fig2")
class Fig2(Experiment):
    description = "1STR, N=100: trained W_Q W_K^T against the Eq. A.2 block (paper B, Fig. 2)"
    runtime = {"quick": "about 3-8 min (2 CPU cores)", "full": "about 17 min (2 CPU cores)"}
    # W_Q W_K^T is recorded at steps 1, 2, 5, 10, ..., 500 too (train.eval_early): the block forms
    # within the first few hundred steps, before the first of the log_every points
    full = Fig2Scale(N=100, train_size=50_000, steps=30_000, seeds=3, log_every=1000)
    quick = Fig2Scale(N=100, train_size=10_000, steps=1_000, seeds=1, log_every=100)

    def plan(self, scale: str, device: str = "auto") -> list[RunConfig]:
        s = self.scale(scale)
        # not a threshold measurement: train the whole budget, evaluate every log_every steps
        train = TrainConfig(lr=s.lr, weight_decay=s.weight_decay, batch_size=s.batch_size,
                            budget=s.steps * s.batch_size, threshold=0.01, stop_at_threshold=False,
                            eval_every=s.log_every, eval_size=s.test_size, eval_mode="every", eval_early=True,
                            train_set_size=s.train_size, probe=True, device=device)
        return [RunConfig("qstr", "tf-b", {"N": s.N, **s.task}, dict(s.model), train, seed, "TF")
                for seed in range(s.seeds)]

    def analyze(self, results: list[RunResult], scale: str) -> Summary:
        s = self.scale(scale)
        runs = []
        for r in results:
            probes = r.extra.get("probes", [])
            if r.status == "error" or not probes:
                continue
            cfg = RunConfig.from_dict(r.config)
            mask = _mask(cfg)
            M0 = _initial_qk(cfg)
            # step 0: the matrix at initialisation (rebuilt from the init seed), before any held-out look
            log: list[dict] = [{"step": 0, "test_mse": None, "block_mass": block_mass(M0, mask),
                                "cosine": block_cosine(M0, mask)}]
            for (samples, mse), p in zip(r.curve, probes):
                M = torch.tensor(p["qk"])
                log.append({"step": samples // cfg.train.batch_size, "test_mse": mse,
                            "block_mass": block_mass(M, mask), "cosine": block_cosine(M, mask)})
            nz = mask[0].nonzero()
            runs.append({"seed": cfg.seed, "d_e": _qstr(cfg).d_e, "wall_s": round(r.wall_s, 1),
                         "init_block_mass": block_mass(M0, mask), "init_cosine": block_cosine(M0, mask),
                         "block_mass": log[-1]["block_mass"], "cosine": log[-1]["cosine"],
                         "test_mse": log[-1]["test_mse"], "log": log, "matrix": probes[-1]["qk"][0],
                         "block": [nz[0].tolist(), nz[-1].tolist()]})  # corners of head 0's block
        # the settings as the runs were made (a --set changes them), not the scale's
        settings, notes = run_settings(results, {
            "N": "task_params.N", "train_size": "train.train_set_size", "budget": "train.budget",
            "batch_size": "train.batch_size", "lr": "train.lr", "weight_decay": "train.weight_decay",
            "eval_size": "train.eval_size"},
            {"N": s.N, "train_size": s.train_size, "budget": s.steps * s.batch_size, "batch_size": s.batch_size,
             "lr": s.lr, "weight_decay": s.weight_decay, "eval_size": s.test_size, "seeds": s.seeds})
        one = {k: (max(v) if isinstance(v, list) else v) for k, v in settings.items() if k != "seed_list"}
        steps = one["budget"] // one["batch_size"]
        data = {**settings, "steps": steps, "epochs": round(one["budget"] / max(1, one["train_size"]), 2),
                "runs": runs, "notes": notes}
        claims = []
        if runs:
            mean = lambda k: float(np.mean([r[k] for r in runs]))  # noqa: E731
            mass, init, cos = mean("block_mass"), mean("init_block_mass"), mean("cosine")
            D = len(runs[0]["matrix"])
            area = runs[0]["d_e"] ** 2 / D**2
            data.update(block_mass=mass, block_mass_init=init, block_area=area, cosine=cos,
                        cosine_init=mean("init_cosine"), test_mse=mean("test_mse"))
            claims = [
                Claim("concentration", "training concentrates W_Q W_K^T in the predicted block: Frobenius mass "
                      f"fraction {mass:.3f} vs {init:.3f} at random initialisation (block area {area:.3f}; "
                      f"hand-set construction {construction_block_mass(one['N']):.3f})", bool(mass > 2 * init),
                      {"block_mass": mass, "block_mass_init": init, "block_area": area}),
                Claim("alignment", f"the trained block is aligned with alpha*I: cosine similarity {cos:.3f} (> 0.5)",
                      bool(cos > 0.5), {"cosine": cos}),
            ]
        return Summary(self.registry_name, scale, data, claims, results)

    def table(self, summary: Summary) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in ("matrix", "log", "block")} for r in summary.data["runs"]]

    def figures(self, summary: Summary, out: Path) -> list[Path]:
        from matplotlib.patches import Rectangle

        from ...reporting.plots import plt, save

        runs = summary.data["runs"]
        if not runs:
            return []
        r = runs[0]
        M = np.array(r["matrix"])
        (r0, c0), (r1, c1) = r["block"]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
        v = np.abs(M).max()
        im = axes[0].imshow(M, cmap="RdBu_r", vmin=-v, vmax=v)
        axes[0].add_patch(Rectangle((c0 - 0.5, r0 - 0.5), c1 - c0 + 1, r1 - r0 + 1, fill=False, ec="k", lw=1.5))
        axes[0].set_title(f"trained W_Q W_K^T (seed {r['seed']}); box: Eq. A.2 block\n"
                          f"mass in block {r['block_mass']:.2f} (init {r['init_block_mass']:.2f}), "
                          f"cosine to I {r['cosine']:.2f}", fontsize=9)
        axes[0].set_xlabel("key slot  [x | w_j | w_{t_j}]")
        axes[0].set_ylabel("query slot  [x | w_i | w_{t_i}]")
        fig.colorbar(im, ax=axes[0], fraction=0.046)
        for rr in runs:
            steps = [e["step"] for e in rr["log"]]
            first = rr is r
            axes[1].plot(steps, [e["block_mass"] for e in rr["log"]], color="C0", marker=".",
                         label="block mass" if first else None)
            axes[1].plot(steps, [e["cosine"] for e in rr["log"]], color="C1", marker=".",
                         label="cosine to I" if first else None)
            mse = [(e["step"], e["test_mse"]) for e in rr["log"] if e["test_mse"] is not None]
            axes[1].plot([x for x, _ in mse], [y for _, y in mse], color="C2", label="test MSE" if first else None)
        axes[1].axhline(summary.data["block_mass_init"], color="C0", ls=":", label="block mass at init")
        axes[1].set_xscale("symlog", linthresh=1)  # step 0 (initialisation), then a log axis
        axes[1].set_xlim(left=0)
        axes[1].set_xlabel("step (0, then log scale)")
        axes[1].set_ylim(0, 1.05)
        axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # outside
        return save(fig, out / "figure")

    def text(self, summary: Summary) -> str:
        s = summary.data
        lines = [f"{summary.experiment} ({summary.scale}): N={s['N']}, {s['train_size']} training examples, "
                 f"{s['steps']} steps ({s['epochs']} epochs), {s['seeds']} seed(s) ({time_text(summary)})"]
        if s["runs"]:
            lines.append(f"  block mass {s['block_mass']:.3f} (random init {s['block_mass_init']:.3f}, "
                         f"block area {s['block_area']:.3f}); cosine to alpha*I {s['cosine']:.3f}; "
                         f"test MSE {s['test_mse']:.3f}")
        return "\n".join(lines + claim_lines(summary.claims))
