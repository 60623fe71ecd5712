"""Paper A, Figure 2 (left): index lookup. A one-layer Transformer of width 64 against LSTM,
Mamba-style and DSS models over lengths N."""
from __future__ import annotations

import dataclasses

from ...results import Claim
from ..base import EXPERIMENTS
from ..size import NOT_FAIR_FULL, SizeExperiment, SizeScale, dss, linear_tf, lstm, mamba, pct, retnet, tf
from ..size_search import LRS, TIE, SearchScale, search_text


# the Transformer at the paper's size, not searched, beside the recurrent families of every search
# below; each family's arch and the field its width is
TF_ARM = ("TF-(1,64)", 'arch = "tf-preln"\nmodel_params = { layers = 1, heads = 1, positions = "learned", '
                       'causal = true, width = 64 }\ntrain = { lr = 0.001 }')
_FAMILIES = {"LSTM": ("lstm", "hidden"), "Mamba": ("mamba", "width"), "DSS": ("s4d", "width"),
             "RetNet": ("retnet", "width"), "LinTF": ("linear-tf", "width")}


def _search(name: str, families: tuple[str, ...], steps: list[int], trials: int, lrs: list[float],
            layers: list[int], widths: list[int], tie: float = 0.0) -> str:
    """A lookup search: TF-(1,64) and `families`, each searched over lr x layers x positions (none,
    learned) x its width, keeping a quarter at each rung (and, with `tie`, any trial within that
    many standard errors of the last kept one's validation error)."""
    return search_text(name, "index-lookup", [TF_ARM, *((f, f'arch = "{_FAMILIES[f][0]}"') for f in families)], steps,
                       0.25, trials, {"train.lr": lrs, "model_params.layers": layers,
                                      "model_params.positions": ["none", "learned"]},
                       {f: {f"model_params.{_FAMILIES[f][1]}": widths} for f in families}, tie)


# "the paper's search" (issue 52; docs/paper_a.md): the five recurrent families paper A runs on
# index lookup, each its best of 12 trials over lr x layers x width x positions within the paper's
# bounds (layers <= 6, width <= 256; here <= 4 and <= 128 on 2 cores), rungs of 1k, 4k and 16k steps
# keeping a quarter, chosen on validation; TF-(1,64) at the paper's size. The cpu scale's protocol
# otherwise. docs/results/lookup-search-n20/sweep.toml is this file at N = 20 (the same run ids).
# SEARCH_TIES is the same search with ties (issue 52): at N = 50 and 100 the first rung (1k steps)
# ranks trials that all sit near chance, so which three of twelve went on was mostly the validation set's noise
# (scripts/search_ties.py: at N = 100 11 or 12 of each recurrent family's trials lie within two
# standard errors of the last one kept). Every trial of the untied walk is the same run here (same
# configs, same ids), so a store holding `search` trains only the trials ties add, and the winners
# they change. It settles whether "Mamba / RetNet below TF-(1,64)" at N = 100 held without their
# best trials; `search` stays as it ran
SEARCH, SEARCH_TIES = (_search(name, tuple(_FAMILIES), [1000, 4000, 16000], 12, LRS, [1, 2, 4], [64, 128], tie)
                       for name, tie in (("lookup-fig2-search", 0.0), ("lookup-fig2-search-ties", TIE)))
# "the paper's bounds": the families the reduced search left below their control at N = 20 (LSTM,
# DSS) searched within paper A's own bounds (<= 6 layers, width <= 256, lr 1e-2 .. 1e-6, the last
# rung at 250k steps). A trial whose configuration the reduced search also drew is the same run
# (same config, same id), so a store holding that search reuses it. Meant for a GPU (--dry-run)
SEARCH_PAPER = _search("lookup-fig2-search-paper", ("LSTM", "DSS"), [1000, 4000, 16000, 64000, 250000], 24,
                       [*LRS, 1e-5, 1e-6], [1, 2, 4, 6], [64, 128, 256])
# "the paper's steps": the reduced search's space and trials for the two families it left below
# their control at N = 20 (LSTM, DSS; each winner still rising at 16k steps), its rungs going on to
# the paper's 250k steps. Its first three rungs are the reduced search's own runs (same trials,
# same ids: a store holding that search reuses them), so only the steps past 16k are new. A
# one-seed calibration took the LSTM's winner to 99% validation at 82k steps
# (docs/results/lookup-search-calibration/)
SEARCH_STEPS = _search("lookup-fig2-search-steps", ("LSTM", "DSS"), [1000, 4000, 16000, 64000, 250000], 12, LRS,
                       [1, 2, 4], [64, 128])
# "the paper's steps with ties": the walk with ties for Mamba, its rungs going on to the paper's 250k
# steps (TF-(1,64) at the same budget). At N = 100 the tied walk's Mamba winner was still rising at
# 16k steps and a one-seed calibration took it to 98.8% validation at 64k, so "Mamba below
# TF-(1,64)" held at the reduced budget only (docs/results/lookup-search-calibration/). Its first
# three rungs are the tied walk's own runs (same ids); search-steps-ties-mamba-n100.toml there is
# this scale at N = 100
SEARCH_STEPS_TIES = _search("lookup-fig2-search-steps-ties", ("Mamba",), [1000, 4000, 16000, 64000, 250000], 12,
                            LRS, [1, 2, 4], [64, 128], TIE)


# the reduced search's caveat (search, search-ties)
_REDUCED = ("reduced bounds (layers <= 4, width <= 128, <= 16k steps; the paper's: <= 6, <= 256, <= 250k): a family "
            "that fails its control here is not evidence against the paper")

# the same bounds with the paper's steps (search-steps, search-steps-ties)
_STEPS = ("reduced bounds (the search's space: layers <= 4, width <= 128; the paper's: <= 6, <= 256; its steps up "
          "to the paper's 250k): a family that fails its control here is not evidence against the paper")


@EXPERIMENTS.register("lookup-fig2")
class LookupFig2(SizeExperiment):
    description = "Index lookup: 1-layer Transformer vs LSTM, Mamba-style and DSS over lengths (paper A, Fig. 2 left)"
    runtime = {"quick": "about 1.3 min (2 CPU cores)", "full": "hours; meant for a GPU",
               "search": "hours per length on 2 cores (--dry-run prices it; --at 20 first)",
               "search-paper": "a GPU's: LSTM and DSS at the paper's bounds (--dry-run prices it)",
               "search-steps": "hours per length on 2 cores past the search's own runs (--dry-run prices it)",
               "search-ties": "hours per length on 2 cores past the search's own runs (--dry-run prices it)",
               "search-steps-ties": "hours per length on 2 cores past the walk with ties' runs (--dry-run prices it)"}
    task = "index-lookup"
    caveats = {"full": NOT_FAIR_FULL, "search": _REDUCED, "search-ties": _REDUCED,
               "search-steps": _STEPS, "search-steps-ties": _STEPS}
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
    search = SearchScale(SEARCH, Ns=(20, 50, 100, 200, 400), tf="TF-(1,64)",
                         families=("LSTM", "Mamba", "DSS", "RetNet", "LinTF"), settle=True)
    # the paper's bounds for the families the reduced search left without a control (N = 20 first)
    search_paper = SearchScale(SEARCH_PAPER, Ns=(20, 50, 100, 200, 400), tf="TF-(1,64)", families=("LSTM", "DSS"),
                               settle=True)
    # the same two families in the reduced search's space with the paper's step budget
    search_steps = SearchScale(SEARCH_STEPS, Ns=(20, 50, 100, 200, 400), tf="TF-(1,64)", families=("LSTM", "DSS"),
                               settle=True)
    # the search with ties, over the same runs (N = 50 and 100 first: the caveat it settles)
    search_ties = dataclasses.replace(search, text=SEARCH_TIES)
    # the walk with ties for Mamba with the paper's steps (N = 100 first: the claim it decides)
    search_steps_ties = dataclasses.replace(search, text=SEARCH_STEPS_TIES, families=("Mamba",))
    scales = ("quick", "cpu", "paper-n", "search", "search-paper", "search-steps", "search-ties", "search-steps-ties",
              "full")

    def claims(self, table: dict, s: SizeScale | SearchScale) -> list[Claim]:
        if isinstance(s, SearchScale):  # the same claims, on each family's winner, at every length done
            if len(s.Ns) < 2:
                return [self.control(lab, min(s.Ns)) for lab in (s.tf, *s.families)]
            out = self.versus(s, s.tf, s.families, every_length=True)
            return out + ([self.reaches(s.tf, max(s.Ns), out[0])] if max(s.Ns) >= 400 else [])
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
