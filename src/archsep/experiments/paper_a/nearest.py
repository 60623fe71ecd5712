"""Paper A, nearest neighbour (SPEC 1.5, Theorem 7): a two-layer Transformer against LSTM-64 and
Mamba-style-64 over lengths N. The queries' labels are those of their nearest labelled point;
a two-layer Transformer does this with a width independent of N (the construction in
`constructions/nearest.py`), while a recurrent model must carry the labelled points in its
state, which grows with N: a separation is predicted only where the state is too small to hold
the labelled half (N/2 points of d + 1 numbers)."""
from __future__ import annotations

from ...results import Claim
from ...tasks.nearest_neighbour import NearestNeighbour
from ..base import EXPERIMENTS
from ..size import NOT_FAIR_FULL, SizeExperiment, SizeScale, lstm, mamba, pct, tf


@EXPERIMENTS.register("nn-fig")
class NearestNeighbourFig(SizeExperiment):
    description = "Nearest neighbour: 2-layer Transformer vs LSTM-64 and Mamba-style-64 over lengths (paper A, Thm. 7)"
    runtime = {"quick": "about 2 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    caveats = {"full": NOT_FAIR_FULL}
    task = "nearest-neighbour"  # d = 16 unit vectors, margin 0.05, noisy queries (the task's defaults)
    full = SizeScale(Ns=(20, 50, 100, 200), archs=(tf(2, (64,)), tf(1, (64,)), lstm((64, 256)), mamba((64, 256))),
                     lrs=(1e-3, 3e-4, 1e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1)
    quick = SizeScale(Ns=(10, 20, 40), archs=(tf(2, (64,)), lstm((64,)), mamba((64,))),
                      lrs=(1e-3,), steps=1500, eval_every=100, val_size=500, test_size=2000)
    # cpu: the fair protocol (docs/paper_a.md): TF-(2,64), LSTM-64 and Mamba-64, one 8k-step
    # budget and lr grid {1e-3, 3e-4}, 3 seeds, N = 20 (the controls) and 80, and one length
    # curriculum for every arm: a cell at N trains first at the shorter lengths (20 for 4000
    # steps, then 40 for 500), then at N. Under the former protocol (fixed length, one lr, 2000
    # steps) TF-(2,64) sat at the labelled-majority baseline (docs/results/nn-fig-cpu/); measured
    # outside (shared/evidence.md), it leaves that plateau at N = 40 and 80 only with sinusoidal
    # positions and this curriculum, so its positions are sinusoidal (the model's, not the recipe's)
    cpu = SizeScale(Ns=(20, 80), archs=(tf(2, (64,), positions="sinusoidal"), lstm((64,)), mamba((64,))),
                    lrs=(1e-3, 3e-4), steps=8000, eval_every=250, val_size=1000, test_size=2000, seeds=3,
                    curriculum=((20, 4000), (40, 500)))
    # state: the fair protocol with a recurrent arm that learns at N = 20 and is short of state
    # at 80, found by a one-seed calibration (docs/results/nn-controls/): Mamba-16 (608 floats;
    # the labelled half is 680 numbers at N = 80) passed its control only at lr 3e-3, so 3e-3
    # joins the grid of every arm (the same grid for all); Mamba-64 beside it, whose state holds
    # the labelled half at 80 (no separation predicted: no verdict by the rule below). Its budget:
    # 1.5x the calibrated control's first step at 95% validation (Mamba-16 at 3e-3: 13,000 steps),
    # rounded up; at the cpu scale's 8000 that run was at 92.9%: a control that could not pass
    state = SizeScale(Ns=(20, 80), archs=(tf(2, (64,), positions="sinusoidal"), mamba((16, 64))),
                      lrs=(3e-3, 1e-3, 3e-4), steps=20000, eval_every=250, val_size=1000, test_size=2000, seeds=3,
                      curriculum=((20, 4000), (40, 500)))
    scales = ("quick", "cpu", "state", "full")

    def claims(self, table: dict, s: SizeScale) -> list[Claim]:
        if self.scale_name(s) in ("cpu", "state"):
            return self.fair_claims(s)
        N = max(s.Ns)
        t = self.acc(table, "TF-(2,64)", N, 64)
        rivals = {lab: self.acc(table, lab, N, 64) for lab in ("LSTM-64", "Mamba-64")}
        return [Claim("ordering", f"N={N}: TF-(2,64) above LSTM-64 and Mamba-64 by >= 2 points ({pct(t)} vs "
                      + ", ".join(f"{k}: {pct(v)}" for k, v in rivals.items()) + ")",
                      t is not None and all(v is not None and t >= v + 0.02 for v in rivals.values()),
                      {"N": N, "TF-(2,64)": t, **rivals})]

    def fair_claims(self, s: SizeScale) -> list[Claim]:
        """Each arm's positive control at the shortest length; at the longest, TF-(2,64) above the
        best trivial baseline (the labelled half's majority label) and each recurrent arm below
        TF-(2,64) (intervals over seeds). A recurrent arm that did not learn at the shortest
        length gets no verdict (falling short at the longest would say nothing about N), and so
        does one whose state can hold the whole labelled half at the longest length: Theorem 7's
        bound needs the state to be too small for it, so no separation is predicted there."""
        hi = max(s.Ns)
        recurrent = tuple(lab for lab in s.labels() if not lab.startswith("TF"))  # Theorem 7: state grows with N
        out = self.versus(s, "TF-(2,64)", recurrent)
        for i, lab in enumerate(recurrent, len(out) - len(recurrent)):  # the `below` claims, last
            claim, (state, need) = out[i], self._state(s, lab, hi)
            if claim.held is not None and state is not None and state >= need:
                out[i] = Claim("ordering", f"no verdict: {lab}'s state ({state} floats) can hold the labelled half "
                               f"at N={hi} ({need} numbers), so Theorem 7 predicts no separation at this length; "
                               f"{claim.text}", None, {**claim.values, "state": state, "labelled_half": need})
        return out

    def _state(self, s: SizeScale, label: str, N: int) -> tuple[int | None, int]:
        """(the floats `label`'s model carries between positions at N, the numbers of the labelled
        half: N/2 points of d coordinates and a label each)."""
        import torch

        cell = next((c for c in self.planned_cells(self.scale_name(s)) if c.label == label and c.N == N), None)
        if cell is None:
            return None, 0
        task = cell.runs[0].build_task()
        with torch.device("meta"):
            model = cell.runs[0].model_config().build(task.spec)
        assert isinstance(task, NearestNeighbour)
        return model.state_size(task.spec.seq_len), task.m * (task.d + 1)
