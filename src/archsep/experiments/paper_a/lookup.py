"""Paper A, Figure 2 (left): index lookup. A one-layer Transformer of width 64 against LSTM,
Mamba-style and DSS models over lengths N."""
from __future__ import annotations

from ...results import Claim
from ..base import EXPERIMENTS
from ..size import SizeExperiment, SizeScale, dss, lstm, mamba, pct, tf


@EXPERIMENTS.register("lookup-fig2")
class LookupFig2(SizeExperiment):
    description = "Index lookup: 1-layer Transformer vs LSTM, Mamba-style and DSS over lengths (paper A, Fig. 2 left)"
    runtime = {"quick": "about 1.3 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    task = "index-lookup"
    # one head, as in Theorem 1's construction. Variable training lengths make the largest
    # indices rare (p = N needs k = N), so most of the budget goes into the last few indices.
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(tf(1, (64,), heads=1), lstm((64, 128, 256)),
                                                     mamba((64, 128, 256)), dss((64, 128, 256))),
                     lrs=(2e-3, 1e-3, 3e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1)
    quick = SizeScale(Ns=(20, 50, 100), archs=(tf(1, (64,), heads=1), lstm((64,))),
                      lrs=(2e-3,), steps=4000, eval_every=200, val_size=500, test_size=5000)
    # cpu: reaches N = 200 on 2 cores. TF-(1,64) gets 40k steps (10 ms each at N = 200 with the
    # readout pruned): training lengths k ~ U{10..N} ask for the last positions rarely, and at
    # 12k steps it plateaued at 89-93% at N = 200 with its errors there (scripts/lookup_positions.py);
    # lr 1e-3 (better than 2e-3 in all four 12k-step cells at N = 100 and 200) plateaued at 94.5%
    # from 40k to 60k steps at N = 200, while 3e-4 passed it (95.9% at 30k), so both. LSTM-64 6k
    # steps; LSTM-256 (150 ms a step at N = 200) 1.5k steps at the two lengths its claim reads.
    cpu = SizeScale(Ns=(50, 100, 200), archs=(tf(1, (64,), heads=1, steps=40_000, lrs=(1e-3, 3e-4)), lstm((64,),
                                                                                                          steps=6000),
                                            lstm((256,), Ns=(100, 200), steps=1500)),
                    lrs=(1e-3,), steps=12_000, eval_every=250, val_size=1000, test_size=5000, seeds=2)
    scales = ("quick", "cpu", "full")

    def claims(self, table: dict, s: SizeScale) -> list[Claim]:
        if self.scale_name(s) == "cpu":
            return self.cpu_claims(table)
        N = 100 if 100 in s.Ns else max(s.Ns)
        t, l_ = self.acc(table, "TF-(1,64)", N, 64), self.acc(table, "LSTM-64", N, 64)
        return [Claim("threshold", f"TF-(1,64) reaches >= 95% test accuracy on index lookup at N={N} ({pct(t)})",
                      t is not None and t >= 0.95, {"N": N, "TF-(1,64)": t}),
                Claim("ordering", f"LSTM-64 is far lower at N={N}: at least 30 points below TF-(1,64) "
                                  f"({pct(l_)} vs {pct(t)})",
                      t is not None and l_ is not None and l_ <= t - 0.30, {"N": N, "LSTM-64": l_, "TF-(1,64)": t})]

    def cpu_claims(self, table: dict) -> list[Claim]:
        out = []
        for N in (100, 200):
            t = self.acc(table, "TF-(1,64)", N, 64)
            lstms = {w: self.acc(table, f"LSTM-{w}", N, w) for w in (64, 256)}
            out.append(Claim("threshold", f"N={N}: TF-(1,64) >= 95% test accuracy ({pct(t)})",
                             t is not None and t >= 0.95, {"N": N, "TF-(1,64)": t}))
            out.append(Claim("ordering", f"N={N}: LSTM-64 and LSTM-256 <= 30% ("
                             + ", ".join(f"LSTM-{w}: {pct(v)}" for w, v in lstms.items()) + ")",
                             all(v is not None and v <= 0.30 for v in lstms.values()),
                             {"N": N, **{f"LSTM-{w}": v for w, v in lstms.items()}}))
        return out
