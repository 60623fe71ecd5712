"""Successive halving replayed on stored validation curves: which learning rate a cell would
have chosen, and how many steps it would have trained, had its grid raced (`TrainConfig.
halving_lrs`) instead of training every rate to its end. The engine's rule (engine/train.py,
`_halve`) applied to curve prefixes: a run's curve up to a rung is exactly what it had seen
there, since the runs of a race never influence each other's training."""
from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

Curve = Sequence[tuple[int, float]]  # (samples, held-out metric), as RunResult.curve


@dataclass(frozen=True)
class Replay:
    chosen_full: int  # grid index chosen with every rate trained to its end (select's rule)
    chosen_raced: int  # ... and under successive halving
    samples_full: int  # samples trained by the whole grid
    samples_raced: int
    halved: dict[int, int]  # grid index -> samples where its race stopped it

    @property
    def same(self) -> bool:
        return self.chosen_full == self.chosen_raced


def _best(curve: Curve, upto: float = math.inf) -> tuple[float, float]:
    """(metric, samples) of the first best point at or before `upto` samples; (inf, inf) if none."""
    best = (math.inf, math.inf)
    for s, m in curve:
        if s <= upto and m < best[0]:
            best = (m, s)
    return best


def _choose(bests: Sequence[tuple[float, float]]) -> int:
    return min(range(len(bests)), key=lambda k: (*bests[k], k))


def replay(curves: Sequence[Curve], rung_samples: Sequence[int]) -> Replay:
    """`curves`: the runs of one cell in grid order, each trained to its own end (threshold,
    budget or divergence); `rung_samples`: the rungs (`TrainConfig.rung_steps()` x batch)."""
    ends = [c[-1][0] if c else 0 for c in curves]
    racing, halved = list(range(len(curves))), {}
    for r in rung_samples:
        ranked = sorted(racing, key=lambda k: (*_best(curves[k], r), k))
        racing = ranked[:math.ceil(len(ranked) / 2)]
        for k in ranked[len(racing):]:
            if ends[k] > r:  # still training at the rung: stopped there
                halved[k] = r
    raced = [_best(c, halved.get(k, math.inf)) for k, c in enumerate(curves)]
    return Replay(_choose([_best(c) for c in curves]), _choose(raced), sum(ends),
                  sum(halved.get(k, e) for k, e in enumerate(ends)), halved)


def read_curves(path: Path) -> dict[tuple, dict[int, list[tuple[int, float]]]]:
    """A results folder's curves.csv (written by a size experiment's reproduce) as {(variant,
    label, N, seed, budget steps): {grid index: [(step, validation error), ...]}}."""
    out: dict[tuple, dict[int, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    with Path(path).open(newline="") as f:
        for row in csv.DictReader(f):
            key = (row["variant"], row["label"], int(row["N"]), int(row["seed"]), int(row["budget_steps"]))
            out[key][int(row["grid_index"])].append((int(row["step"]), 1.0 - float(row["val_acc"])))
    return {k: {i: sorted(c) for i, c in v.items()} for k, v in out.items()}
