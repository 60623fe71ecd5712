"""Paper A, Figure 2 (right): bounded Dyck-(2,2). One-layer Transformers of growing width and
a two-layer one against LSTM-64 and Mamba-style-64 over lengths N."""
from __future__ import annotations

from ...results import Claim
from ..base import EXPERIMENTS
from ..size import NOT_FAIR_FULL, SizeExperiment, SizeScale, lstm, mamba, pct, tf
from ..size_claims import jointly
from ..size_search import LRS, TIE, SearchScale, search_text


def _tf(layers: int, width: int) -> str:
    return (f'arch = "tf-preln"\nmodel_params = {{ heads = 4, layers = {layers}, positions = "learned", causal = true, '
            f'width = {width} }}')


_ARMS = [("TF-(1,64)", _tf(1, 64)), ("TF-(1,256)", _tf(1, 256)), ("TF-(2,64)", _tf(2, 64)),
         ("LSTM-64", 'arch = "lstm"\nmodel_params = { layers = 1, hidden = 64 }'),
         ("Mamba-64", 'arch = "mamba"\nmodel_params = { layers = 1, width = 64 }')]
# "the paper's search" on Dyck (issue 54): the five arms at the paper's sizes, each its best of a
# search over the learning rate on a log grid from 1e-2, successive halving at 1k, 5k, 20k and 135k steps
# keeping half (and any trial within `TIE` standard errors of the last kept one's validation error:
# near chance their order is noise), chosen on validation, the winner with 3 seeds; the same search
# for every arm (the Transformers too: at the cpu scale's 2000 steps none trained at N = 100). The
# cpu scale's protocol otherwise, its validation every 250 steps. Its 20k-step rung runs are the
# Dyck calibration's runs (docs/results/dyck-controls/sweep.toml: the same configs, the same ids).
# The last rung is calibrated (docs/results/dyck-controls/, sweep-long.toml): at N = 20 under a
# 20k-step last rung TF-(1,256)'s control failed at a 95.2% plateau; given 100k steps its trial at
# lr 1e-4 left it and reached 99% validation at 87,750 steps (TF-(1,64) at 32,750): 135k is 1.5x
# that, rounded up (equality's rule)
SEARCH = search_text("dyck-fig2-search", "dyck", _ARMS, [1000, 5000, 20000, 135000], 0.5, 5,
                     {"train.lr": LRS}, {label: {} for label, _ in _ARMS}, TIE)


@EXPERIMENTS.register("dyck-fig2")
class DyckFig2(SizeExperiment):
    description = "Bounded Dyck-(2,2): TF-(1,w) and TF-(2,64) vs LSTM-64 and Mamba-style-64 (paper A, Fig. 2 right)"
    runtime = {"quick": "about 1 min (2 CPU cores)", "full": "hours; meant for a GPU",
               "search": "hours per length on 2 cores, N >= 200 a GPU's (--dry-run prices it; --at 20 first)"}
    task = "dyck"
    caveats = {"full": NOT_FAIR_FULL,
               "search": "reduced bounds (<= 135k steps; the paper's: <= 250k, lr down to 1e-6): an arm that fails "
                         "its control here is not evidence against the paper"}
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(tf(1, (64, 128, 256)), tf(2, (64,)), lstm((64,)), mamba((64,))),
                     lrs=(1e-3, 3e-4, 1e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1)
    quick = SizeScale(Ns=(20, 50, 100), archs=(tf(1, (64,)), lstm((64,))),
                      lrs=(1e-3,), steps=1000, eval_every=100, val_size=500, test_size=5000)
    # cpu: the fair protocol (issue "paper A as a fair test"): every architecture the paper names
    # for Dyck, one step budget and one learning-rate grid for all, three seeds, N up to 100 (the
    # length up to which the paper has even TF-(1,256) near-perfect; 20: every arm's control), within
    # about 2 hours on 2 cores by --dry-run (every run to its budget; 50 would add another hour)
    cpu = SizeScale(Ns=(20, 100), archs=(tf(1, (64, 256)), tf(2, (64,)), lstm((64,)), mamba((64,))),
                    lrs=(1e-3, 3e-4), steps=2000, eval_every=100, val_size=1000, test_size=2000, seeds=3)
    # paper-n: the paper's longest length on 2 cores, the headline arms (TF-(1,64) and TF-(2,64)
    # against LSTM-64) under the same protocol: one 12k-step budget and lr grid {1e-3, 3e-4}, 3
    # seeds, N = 20 (the controls) and 400; 5.4 hours by --dry-run (every run to its budget;
    # 20k steps would be 9.1), resumed through the store when stopped. Both rates are needed:
    # at N = 100 the LSTM won at 1e-3 in every seed, the Transformers learn long inputs at 3e-4
    paper_n = SizeScale(Ns=(20, 400), archs=(tf(1, (64,)), tf(2, (64,)), lstm((64,))), lrs=(1e-3, 3e-4),
                        steps=12_000, eval_every=250, val_size=1000, test_size=2000, seeds=3)
    search = SearchScale(SEARCH, Ns=(20, 50, 100, 200, 400), tf="",
                         families=tuple(label for label, _ in _ARMS), settle=True)
    scales = ("quick", "cpu", "paper-n", "search", "full")
    # the paper: LSTM-64, Mamba-64 and TF-(2,64) near-perfect up to N = 400, TF-(1,256) up to 100
    recognisers = ("LSTM-64", "Mamba-64", "TF-(2,64)", "TF-(1,256)")

    def claims(self, table: dict, s: SizeScale | SearchScale) -> list[Claim]:
        if isinstance(s, SearchScale):
            return self.search_claims(s)
        if self.scale_name(s) in ("cpu", "paper-n"):
            return self.fair_claims(s)
        lo, hi = min(s.Ns), max(s.Ns)
        by_N = {N: self.acc(table, "LSTM-64", N, 64) for N in s.Ns}
        out = [Claim("threshold", "LSTM-64 reaches >= 95% on Dyck-(2,2) at every length ("
                     + ", ".join(f"N={N}: {pct(v)}" for N, v in by_N.items()) + ")",
                     all(v is not None and v >= 0.95 for v in by_N.values()), {"LSTM-64": by_N})]
        a, b = self.acc(table, "TF-(1,64)", lo, 64), self.acc(table, "TF-(1,64)", hi, 64)
        seq = {N: self.acc(table, "TF-(1,64)", N, 64) for N in s.Ns}
        out.append(Claim("trend", f"TF-(1,64)'s Dyck accuracy falls as N grows (N={lo}: {pct(a)} -> N={hi}: {pct(b)}; "
                                  "held = lower at the largest N than at the smallest, by >= 2 points)",
                         a is not None and b is not None and b <= a - 0.02, {"TF-(1,64)": seq}))
        return out

    def fair_claims(self, s: SizeScale) -> list[Claim]:
        """Each arm's positive control at the shortest length; each recogniser above the best
        trivial baseline (the type-blind depth counter) at the longest; the fixed-width one-layer
        Transformer below the LSTM there, which says something only if it learned at the shortest
        and a two-layer Transformer learned at the longest; each recogniser reading bracket types
        at both lengths (`reads`: the type-swapped negatives, which the depth counter accepts)."""
        lo, hi = min(s.Ns), max(s.Ns)
        recognisers = [lab for lab in self.recognisers if lab in s.labels()]  # the scale's
        controls = {lab: self.control(lab, lo) for lab in (*recognisers, "TF-(1,64)")}
        out = list(controls.values())
        recognised = {lab: self.beats_baseline(lab, hi, controls[lab]) for lab in recognisers}
        out += list(recognised.values())
        # TF-(1,64) falling short at N = hi says something about its width only if a Transformer
        # trains at that length under this protocol: TF-(2,64), which the paper has recognise
        # Dyck there, is the second control
        one, two = controls["TF-(1,64)"], recognised["TF-(2,64)"]
        gate = Claim("control", f"{one.text}; and a Transformer trains at N={hi}: {two.text}",
                     jointly(one.held, two.held), {"TF-(1,64)": one.held, "TF-(2,64)": two.held})
        out.append(self.below("TF-(1,64)", "LSTM-64", hi, gate))
        # the depth counter (the best trivial baseline) is blind to bracket types: on the
        # type-swapped negatives it scores 0%, so each recogniser is read on them too
        out += [self.reads(lab, N, controls[lab], "type-swaps", "reads bracket types", "a type-blind depth counter")
                for lab in recognisers for N in (lo, hi)]
        return out

    def search_claims(self, s: SearchScale) -> list[Claim]:
        """Paper A's Dyck statements on each arm's winner: every arm's positive control at the
        shortest length; LSTM-64, Mamba-64 and TF-(2,64) near-perfect at every length, and
        TF-(1,256) up to N = 100 (near-perfect: the 95% interval's lower end above the type-blind
        depth counter, the best trivial baseline, which reaches 98.6% at N = 400, so a plain 95%
        would not do); TF-(1,256) below LSTM-64 beyond 100; TF-(1,64) below TF-(1,256) at 100 (the
        width bound); each recogniser reading bracket types on the type-swapped negatives (the
        depth counter scores 0% there) at the shortest and the longest length it is claimed at."""
        lo = min(s.Ns)
        controls = {lab: self.control(lab, lo) for lab in s.families}
        out = list(controls.values())
        if len(s.Ns) < 2:
            return out
        wide, upto = "TF-(1,256)", [N for N in s.Ns if lo < N <= 100]
        near = {lab: [N for N in s.Ns if N > lo] for lab in ("LSTM-64", "Mamba-64", "TF-(2,64)")}
        near[wide] = upto
        out += [self.beats_baseline(lab, N, controls[lab]) for lab, Ns in near.items() for N in Ns]
        out += [self.below(wide, "LSTM-64", N, controls[wide]) for N in s.Ns if N > 100]
        if upto:
            out.append(self.below("TF-(1,64)", wide, max(upto), controls["TF-(1,64)"]))
        out += [self.reads(lab, N, controls[lab], "type-swaps", "reads bracket types", "a type-blind depth counter")
                for lab, Ns in near.items() for N in dict.fromkeys([lo, *Ns[-1:]])]
        return out
