"""Successive halving replayed on committed validation curves: for every size cell whose
results folder keeps its curves (curves.csv, written by reproduce), the learning rate the cell
chose with its whole grid trained, the one it would have chosen had the grid raced
(TrainConfig.halving_lrs / SizeScale.halving), and the steps the race saves.

    python benchmarks/halving_replay.py [DIR ...] [--rungs 0.25 0.5]

DIR defaults to every docs/results/*/ with a curves.csv. A cell that chose another rate under
the race is listed by name; the totals give the fraction of the grid's steps saved. Runs that
were themselves raced (stopped "halved") are replayed as they are: their curves end at the rung.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from archsep.analysis.halving import read_curves, replay
from archsep.config import TrainConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", type=Path)
    ap.add_argument("--rungs", nargs="+", type=float, default=[0.25, 0.5], help="fractions of the step budget")
    a = ap.parse_args()
    dirs = a.dirs or sorted(p.parent for p in Path("docs/results").glob("*/curves.csv"))
    total_full = total_raced = n = same = 0
    for d in dirs:
        found = read_curves(d / "curves.csv")
        dn = dsame = dfull = draced = 0
        for (variant, label, N, seed, budget), runs in sorted(found.items()):
            if len(runs) < 2:
                continue
            every = min(s for r in runs.values() for s, _ in r)  # the first evaluation: eval_every
            rungs = TrainConfig(batch_size=1, budget=budget, eval_every=every, lr=1.0,
                                halving_lrs=(1.0, 2.0), halving_rungs=tuple(a.rungs)).rung_steps()
            rep = replay([sorted(runs[k]) for k in sorted(runs)], rungs)
            dn, dsame = dn + 1, dsame + rep.same
            dfull, draced = dfull + rep.samples_full, draced + rep.samples_raced
            if not rep.same:
                print(f"  {d.name}: {label}{' [' + variant + ']' if variant else ''} N={N} seed={seed}: "
                      f"grid index {rep.chosen_full} chosen, the race would choose {rep.chosen_raced}")
        print(f"{d.name}: {dsame}/{dn} cells choose the same learning rate; steps {draced} of {dfull} "
              f"({1 - draced / max(dfull, 1):.1%} saved), rungs {a.rungs}")
        n, same, total_full, total_raced = n + dn, same + dsame, total_full + dfull, total_raced + draced
    print(f"all: {same}/{n} cells the same; {1 - total_raced / max(total_full, 1):.1%} of the grid's steps saved")


if __name__ == "__main__":
    main()
