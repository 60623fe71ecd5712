"""Paper A, Figure 2 (left): index lookup. A one-layer Transformer of width 64 against LSTM,
Mamba-style and DSS models over lengths N."""
from __future__ import annotations

from ...results import Claim
from ..base import EXPERIMENTS
from ..size import NOT_FAIR_FULL, SizeExperiment, SizeScale, dss, linear_tf, lstm, mamba, pct, retnet, tf


@EXPERIMENTS.register("lookup-fig2")
class LookupFig2(SizeExperiment):
    description = "Index lookup: 1-layer Transformer vs LSTM, Mamba-style and DSS over lengths (paper A, Fig. 2 left)"
    runtime = {"quick": "about 1.3 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    task = "index-lookup"
    caveats = {"full": NOT_FAIR_FULL}
    # one head, as in Theorem 1's construction. Variable training lengths make the largest
    # indices rare (p = N needs k = N), so most of the budget goes into the last few indices.
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(tf(1, (64,), heads=1), lstm((64, 128, 256)),
                                                     mamba((64, 128, 256)), dss((64, 128, 256))),
                     lrs=(2e-3, 1e-3, 3e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1)
    quick = SizeScale(Ns=(20, 50, 100), archs=(tf(1, (64,), heads=1), lstm((64,))),
                      lrs=(2e-3,), steps=4000, eval_every=200, val_size=500, test_size=5000)
    # cpu: the fair protocol (docs/paper_a.md): every architecture the paper names for index
    # lookup at width 64, one 8k-step budget and lr grid {1e-3, 3e-4} for all, 3 seeds, every run
    # to the target or its budget; N = 20 (every arm's control) and 100. No plateau stop and no
    # learning-rate race: replayed on dyck-fig2's cpu curves both would have stopped runs that
    # learned later (benchmarks/halving_replay.py, docs/paper_a.md). The former cpu scale gave
    # TF-(1,64) 40k steps and two learning rates and the LSTMs 1.5k-6k steps at one: its claims
    # could not fail.
    cpu = SizeScale(Ns=(20, 100), archs=(tf(1, (64,), heads=1), lstm((64,)), mamba((64,)), dss((64,)),
                                         retnet((64,)), linear_tf((64,))),
                    lrs=(1e-3, 3e-4), steps=8000, eval_every=250, val_size=1000, test_size=2000, seeds=3)
    # paper-n: the paper's longest length on 2 cores for the headline cells, TF-(1,64) against
    # LSTM-64, Mamba-64 and RetNet-64, under the cpu scale's protocol with dyck-fig2 paper-n's
    # 12k-step budget (TF-(1,64) was still rising at 8k steps at N = 100): one budget and lr grid
    # {1e-3, 3e-4} for all, 3 seeds, N = 20 (the controls) and 400. The recurrent arms' controls
    # failed at N = 20 even with 40k steps (docs/results/lookup-controls/), so their claims at 400
    # are expected to read "no verdict"; TF-(1,64)'s, near-perfect at N = 400 in the paper, are
    # the measurement
    paper_n = SizeScale(Ns=(20, 400), archs=(tf(1, (64,), heads=1), lstm((64,)), mamba((64,)), retnet((64,))),
                        lrs=(1e-3, 3e-4), steps=12_000, eval_every=250, val_size=1000, test_size=2000, seeds=3)
    # the arms the paper has degrade beyond N = 100 (LSTM near chance there)
    recurrent = ("LSTM-64", "Mamba-64", "DSS-64", "RetNet-64", "LinTF-64")
    scales = ("quick", "cpu", "paper-n", "full")

    def claims(self, table: dict, s: SizeScale) -> list[Claim]:
        if self.scale_name(s) in ("cpu", "paper-n"):
            return self.fair_claims(s)
        N = 100 if 100 in s.Ns else max(s.Ns)
        t, l_ = self.acc(table, "TF-(1,64)", N, 64), self.acc(table, "LSTM-64", N, 64)
        return [Claim("threshold", f"TF-(1,64) reaches >= 95% test accuracy on index lookup at N={N} ({pct(t)})",
                      t is not None and t >= 0.95, {"N": N, "TF-(1,64)": t}),
                Claim("ordering", f"LSTM-64 is far lower at N={N}: at least 30 points below TF-(1,64) "
                                  f"({pct(l_)} vs {pct(t)})",
                      t is not None and l_ is not None and l_ <= t - 0.30, {"N": N, "LSTM-64": l_, "TF-(1,64)": t})]

    def fair_claims(self, s: SizeScale) -> list[Claim]:
        """Each arm's positive control at the shortest length; at the longest, TF-(1,64) above the
        best trivial baseline and every recurrent arm of the scale below it (`SizeExperiment.versus`);
        at the paper's N = 400 also the paper's own statement, TF-(1,64) near-perfect (>= 95%) there."""
        out = self.versus(s, "TF-(1,64)", tuple(lab for lab in self.recurrent if lab in s.labels()))
        if max(s.Ns) >= 400:
            out.append(self.reaches("TF-(1,64)", max(s.Ns), out[0]))
        return out
