"""A size preset's search scale: "the paper's search" protocol, beside the "same size" one.

Paper A's claims are of the form "even the best recurrent model within the paper's bounds
loses to a small fixed Transformer". A `SearchScale` declares that search as a sweep file with a
`[search]` table (`sweeps.search`): the recurrent families are searched (the same number of
trials, the same rungs for each), the Transformer stays at the paper's size; the scale's
lengths are the grid. Its cells are each family's winner per length, one per seed, so the
preset's fair claims (controls, baselines, intervals over seeds) read them as they read a
declared architecture; each claim names its protocol, the search and the winner it read.
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..results import Claim, RunResult, Summary
from ..sweeps.file import Sweep, parse
from ..sweeps.search import Search, Walk, replay
from .size_claims import CONTROL
from .size_unused import unused

if TYPE_CHECKING:
    from ..config import RunConfig

SAME_SIZE, SEARCH = "same size", "the paper's search"
NOT_RUN = ("a positive control their claims rest on failed (their arm's own, or one gating them), so no claim there "
           "can reach a verdict (`experiments/size_unused.py`; --every-cell trains them)")
LRS = [1e-2, 3e-3, 1e-3, 3e-4, 1e-4]  # the searches' learning rates: the paper's log grid from 1e-2, to 1e-4
# the binary tasks' searches (Dyck, equality): a trial within two standard errors of the last kept
# one's validation error goes on too (`sweeps.search`, tie): near chance, on 1000 examples, 3.2
# points, where after a 1k-step rung every trial may still sit and their order is noise. Measured:
# equality's search at N = 20 dropped TF-(2,64)'s lr 1e-3 on eq-one at 1k steps (validation 50.2%
# against the kept 52.3-52.9%), and that trial reaches 99.1% validation at 14k steps
# (docs/results/equality-one-controls/)
TIE = 2.0
# the training protocol every preset's search shares (the fair protocol's): validation every 250
# steps on 1000 examples, stop at 99%, the best checkpoint's test accuracy on 2000
PROTOCOL = ('weight_decay = 0.0, threshold = 0.01000000000100001, eval_every = 250, eval_size = 1000, '
            'eval_mode = "every", keep_best = true, test_size = 2000')


def search_text(name: str, task: str, arms: list[tuple[str, str]], steps: list[int], keep: float, trials: int,
                axes: dict[str, list], own: dict[str, dict[str, list]], tie: float = 0.0) -> str:
    """A preset's search as sweep-file text (`SearchScale.text`): `task` at N = 20 (the scale's
    lengths replace it), 3 seeds, `PROTOCOL`; `arms` as (label, its TOML lines), in order; the
    search's rungs `steps`, `keep`, `trials` and seed 0 (and `tie`, where > 0); `axes` searched in
    every arm named in `own`, each with its own axes besides ({} for none). Values are written as JSON, which is
    TOML for lists of numbers and strings."""
    def table(d: dict[str, list]) -> str:
        return "".join(f'"{k}" = {json.dumps(v)}\n' for k, v in d.items())

    return (f'\nname = "{name}"\nseeds = 3\n[base]\ntask = "{task}"\ntask_params = {{ N = 20 }}\n'
            f"train = {{ {PROTOCOL} }}\n"
            + "".join(f'[[arms]]\nlabel = "{label}"\n{body}\n' for label, body in arms)
            + f"[search]\nsteps = {json.dumps(steps)}\nkeep = {keep}\ntrials = {trials}\nseed = 0\n"
            + (f"tie = {tie}\n" if tie else "")
            + "[search.axes]\n" + table(axes)
            + "".join(f"[search.arms.{json.dumps(label)}]\n" + table(mine) for label, mine in own.items()))


@dataclass(frozen=True)
class SearchScale:
    """The sweep file of a search (TOML text, its grid left out) at lengths `Ns`; `tf` names
    the arm that is not searched (the Transformer at the paper's size; "" where every arm is
    searched, as on Dyck and equality, whose Transformers are arms of the comparison too)."""

    text: str
    Ns: tuple[int, ...]
    tf: str
    families: tuple[str, ...]  # the searched arms' labels, in the order claims name them
    # every searched family's positive control is at the shortest length (its mean test accuracy
    # at CONTROL), and every claim on a family there is gated by it: a winner whose first seed
    # settles that control's failure trains no other seed (`sweeps.search`, [search.settle])
    settle: bool = False

    def at(self, Ns: tuple[int, ...]) -> "SearchScale":
        return dataclasses.replace(self, Ns=Ns)


def search_sweep(name: str, scale: str, s: SearchScale, at: list[int] | None = None,
                 device: str | None = None) -> Sweep:
    """The preset's search as a sweep: its file at the scale's lengths (`at`: some of them)."""
    from ..errors import ArchsepError

    if at:
        bad = [n for n in at if n not in s.Ns]
        if bad:
            raise ArchsepError.at("at", f"N={bad[0]} is not a length of {name} --scale {scale}; "
                                        f"allowed: {', '.join(map(str, s.Ns))}")
    Ns = [n for n in s.Ns if not at or n in at]
    full = f"{name}-{scale}" + (f"-N{'-'.join(map(str, Ns))}" if at else "")
    settle = (f'\n[search.settle]\nlevel = {CONTROL}\nat = {{ "task_params.N" = {min(s.Ns)} }}\n'
              if s.settle and min(s.Ns) in Ns else "")
    # the file as it runs: its name and the lengths as its grid (what --print-toml shows, and the
    # store keeps with the runs)
    if "[grid]" in s.text:  # a file with lengths of its own: the scale's replace them
        sweep = parse(s.text + settle, origin=f"preset:{name}", replace={"grid": {"task_params.N": Ns}, "name": full},
                      device=device)
    else:
        text = re.sub(r'(?m)^name = ".*"$', f'name = "{full}"', s.text, count=1).rstrip("\n")
        sweep = parse(text + settle + f'\n\n[grid]\n"task_params.N" = {Ns}\n', origin=f"preset:{name}",
                      device=device)
    return dataclasses.replace(sweep, preset=name, analysis={**sweep.analysis, "scale": scale})


def width_of(params: dict) -> int:
    return int(params.get("width", params.get("hidden", 0)) or 0)


def winner_runs(search: Search, w: Walk) -> list[tuple[str, int, int, int, RunConfig]]:
    """Each complete cell's runs at every seed, as (label, N, width, seed, config): a searched
    family's winner (its configuration) or the arm that is not searched."""
    out = []
    for c, cell in enumerate(search.cells):
        t = w.winner(c)
        if c in w.incomplete or t is None:
            continue
        for seed in search.seeds:
            cfg = search.config(c, t, None, seed)
            out.append((cell.label, int(cfg.task_params["N"]), width_of(cfg.model_params), seed, cfg))
    return out


def analyze(exp: Any, results: list[RunResult], scale: str) -> Summary:
    """The search scale's summary for size experiment `exp`: the search replayed over `results`
    (a store's), each family's winner per length with its seeds as its cells, the claims read on
    them."""
    s: SearchScale = exp.scale(scale)
    search = search_sweep(exp.registry_name, scale, s).search
    assert search is not None
    by_id = {r.run_id: r for r in results}
    w = replay(search, by_id)
    cells = exp.winner_cells(search, w)
    records = [exp.record(c, [by_id.get(c.runs[0].run_id)]) for c in cells]
    winners = []
    for c, cell in enumerate(search.cells):
        t = w.winner(c)
        if cell.searched and t is not None and c not in w.incomplete:
            winners.append({"label": cell.label, "N": cell.point["task_params.N"], "trial": t,
                            "params": cell.params(t), "rungs": w.rungs[c]})
    tc = search.config(0, 0, 0).train  # the protocol every run shares (the file's base)
    cost = search_cost(search, w)
    Ns = sorted({c.N for c in cells})
    data: dict[str, Any] = {
        "task": exp.task, "protocol": SEARCH, "search": search.describe(), "winners": winners, "search_cost": cost,
        "baselines": exp.baselines(cells), "Ns": Ns or list(s.Ns),
        "lrs": sorted({c.runs[0].train.lr for c in cells}), "steps": search.steps[-1],
        "seeds": len(search.seeds), "seed_list": list(search.seeds),
        "eval_size": tc.eval_size, "test_size": tc.test_size,
        "target": round(1 - tc.threshold, 6), "threshold": tc.threshold,
        "unequal": [], "n_cells": len(records),
        "n_errors": sum(r["status"] == "error" for r in records),
        "n_missing": sum(r["status"] == "missing" for r in records), "cells": records,
        "incomplete": [], "not_run": [], "notes": [],
        "settled": [{"label": search.cells[c].label, "N": search.cells[c].point["task_params.N"], **got}
                    for c, got in sorted(w.settled.items())]}
    # a cell not finished that no claim can use (its arm's control failed) is not run: said apart
    pending = {(cell.label, int(cell.point["task_params.N"])): cell.name
               for c, cell in enumerate(search.cells) if c in w.incomplete}
    left = set(unused(exp, data, scale, list(pending)))
    data["not_run"] = [{"label": lab, "N": N, "cell": pending[lab, N]} for lab, N in sorted(left)]
    data["incomplete"] = sorted(name for key, name in pending.items() if key not in left)
    if data["incomplete"]:
        data["notes"].append(f"{len(data['incomplete'])} cell(s) of the search are not finished: "
                             + ", ".join(data["incomplete"]))
    for got in data["settled"]:
        data["notes"].append(
            f"{got['label']} at N={got['N']}: its first seed's test accuracy {100 * got['accuracy']:.1f}% leaves the "
            f"mean of {got['seeds']} seeds at most {100 * got['most']:.1f}% even if the others scored 100%, below "
            f"the control's {100 * got['level']:.0f}%: the control fails whatever they score, so they were not trained")
    if left:
        data["notes"].append(f"{len(left)} cell(s) not run: {NOT_RUN}: "
                             + ", ".join(c["cell"] for c in data["not_run"]))
    summary = Summary(exp.registry_name, scale, data, exp.claims_of(data, scale), w.results())
    summary.walk = (search, w)  # type: ignore[attr-defined]  # the curves' cells; not written
    return summary


def search_cost(search: Search, w: Walk) -> dict[str, Any]:
    """What a walked search cost against training every trial to the last rung (issue "many
    small models, fast"), over its finished cells: the steps its trials trained (each trial's
    latest run covers all of it) and every trial to the end would, and the runs' own time, its
    trials' and the winners' other runs'."""
    trials = [r for c, by in w.latest.items() if c not in w.incomplete for r in by.values()]
    done = [c for c, cell in enumerate(search.cells) if cell.searched and c not in w.incomplete]
    ids = {t.run_id for t in trials}
    return {"trial_steps": sum(steps_trained(r) for r in trials),
            "every_trial_to_the_end": sum(len(search.cells[c].flats) for c in done) * search.steps[-1],
            "trials_wall_s": round(sum(r.wall_s for r in trials), 1),
            "winners_wall_s": round(sum(r.wall_s for r in w.final.values() if r.run_id not in ids), 1)}


def steps_trained(r: RunResult) -> int:
    """The steps a run trained: to its first crossing, its stop, or its budget."""
    bs = int(r.config["train"]["batch_size"])
    if r.samples is not None:
        return r.samples // bs
    return (r.curve[-1][0] if r.curve else 0) // bs


def tag(claims: list[Claim], data: dict) -> list[Claim]:
    """Every claim names its protocol (text and values); a search's claims also the search and
    the winners they read (the labels among their values, at their length)."""
    protocol = data.get("protocol", SAME_SIZE)
    winners = {(w["label"], w["N"]): w["params"] for w in data.get("winners") or []}
    out = []
    for c in claims:
        values: dict[str, Any] = {**c.values, "protocol": protocol}
        if protocol == SEARCH:
            d = data["search"]
            values["search"] = {k: d[k] for k in ("trials", "steps", "keep", "seed", "tie") if k in d}
            named = [k for k in c.values if (k, c.values.get("N")) in winners]
            if "label" in c.values:
                named.append(c.values["label"])
            values["winners"] = {lab: winners[(lab, c.values.get("N"))] for lab in dict.fromkeys(named)
                                 if (lab, c.values.get("N")) in winners}
        out.append(Claim(c.kind, f"[{protocol}] {c.text}", c.held, values))
    return out


def protocol_text(d: dict) -> list[str]:
    """The summary text's lines on a search: the search, then each winner."""
    if d.get("protocol") != SEARCH:
        return []
    s = d["search"]
    lines = [f"  protocol: {SEARCH}: each family's best of {s['trials']} trials drawn from its space, successive "
             f"halving at {s['steps']} steps (keep {s['keep']:g}"
             + (f", and any trial within {s['tie']:g} standard errors of the last kept one's validation error"
                if s.get("tie") else "")
             + f"), chosen on validation; the winner with seeds "
             f"{s['seeds']}; the arm not searched as declared"]
    for lab, arm in s["arms"].items():
        lines.append(f"    {lab} space: " + ", ".join(f"{k.split('.')[-1]} {v}" for k, v in arm["space"].items()))
    for w in d.get("winners") or []:
        lines.append(f"    winner {w['label']} at N={w['N']}: "
                     + ", ".join(f"{k.split('.')[-1]}={v}" for k, v in w["params"].items()))
    c = d.get("search_cost")
    if c and c["every_trial_to_the_end"]:
        lines.append(f"    the trials trained {c['trial_steps']} steps of the {c['every_trial_to_the_end']} that every "
                     f"trial to the last rung would take ({100 * c['trial_steps'] / c['every_trial_to_the_end']:.0f}%; "
                     f"{c['trials_wall_s']:.0f} s of their runs' own time, the winners' other runs "
                     f"{c['winners_wall_s']:.0f} s)")
    if d.get("incomplete"):
        lines.append(f"    not finished: {', '.join(d['incomplete'])}")
    for got in d.get("settled") or []:
        lines.append(f"    settled: {got['label']} at N={got['N']}, its control failing on its first seed "
                     f"({100 * got['accuracy']:.1f}%: the mean of {got['seeds']} at most {100 * got['most']:.1f}%), "
                     "the other seeds not trained")
    if d.get("not_run"):
        lines.append(f"    not run (the note says why): {', '.join(c['cell'] for c in d['not_run'])}")
    return lines
