"""The cells of a search scale that no claim can use: not trained.

An arm whose positive control finished and failed "did not train here": every claim on it at a
longer length reads "no verdict" whatever it scores there (`size_claims.untrained`). Training it
there anyway is hours spent on a verdict already known (the lookup search's LSTM and DSS at
N = 200: about 19 of its 67 core-hours, `--dry-run`). So a search scale leaves out such a cell,
and says so in its summary, where the claims show it: probed, not assumed. A cell is left out when

- some claim reads it (its text changes with the cell's result: a cell no claim reads, e.g. a
  length between the shortest and the longest where a preset claims at the longest alone, is
  the figure's, and trains; lookup's search claims at every length), and
- no claim's verdict changes with it: the same verdicts whether the cell is missing or scores
  0 or 1, whatever the cells not finished yet score (each of 0, 0.5 and 1, at the shortest length
  and at the others independently). A control not decided yet is one of those: filled at 1 it
  passes, and then a claim gated on it reads the cell, which trains. A claim that reads results
  other than by `get` sees no probe, so the cell looks unread and trains: the rule errs that way.

The claims are the preset's own (`SizeExperiment.claims`), so a new preset, or a claim that
compares with an arm whose control failed (Dyck's "TF-(1,64) below TF-(1,256)"), needs nothing
here. `--every-cell` trains every cell all the same.
"""
from __future__ import annotations

from typing import Any, Callable

from ..analysis.size import accuracy_table, extra_points, size_points

FILLS = (0.0, 0.5, 1.0)  # what a cell not finished yet may score, in the probe
PROBES = (None, 0.0, 1.0)  # what the probed cell scores: missing, nothing, everything


class _Probe(dict):
    """A claim's view of results while probing: a known key as it is, the probed cell's keys as
    `value`, any other key as `fill(key)`."""

    def __init__(self, known: dict, probed: Callable[[Any], bool], value: Any, fill: Callable[[Any], Any]):
        super().__init__(known)
        self.probed, self.value, self.fill = probed, value, fill

    def get(self, key: Any, default: Any = None) -> Any:
        if self.probed(key):
            return self.value
        return super().get(key, self.fill(key))


def _point(v: float | None) -> dict | None:
    return None if v is None else {"mean": v, "ci": [v, v]}


def unused(exp: Any, data: dict, scale: str, cells: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Of `cells` ((label, N), none finished) of size experiment `exp`'s search scale `scale`, the
    ones no claim can use (the module's rule), given the summary data of what has finished
    (`size_search.analyze`). The claims are read at the finished lengths and the cell's."""
    s = exp.scale(scale)
    lo = min(s.Ns)
    points = {(p["label"], p["N"]): p for p in size_points(data["cells"])}
    extra = extra_points(data["cells"])
    base = {(b["variant"], b["N"]): b["best_acc"] for b in data.get("baselines") or []}
    table = accuracy_table(data["cells"])
    saved = {k: getattr(exp, k) for k in ("points", "extra", "best_trivial") if hasattr(exp, k)}
    out = []
    try:
        for label, N in cells:
            if N <= lo or (label, N) in points:  # a control, or a finished cell
                continue
            at = s.at(tuple(sorted({*data.get("Ns", ()), lo, N})))
            if _unusable(exp, at, label, N, (points, extra, base, table)):
                out.append((label, N))
    finally:
        for k in ("points", "extra", "best_trivial"):
            if k in saved:
                setattr(exp, k, saved[k])
            elif hasattr(exp, k):
                delattr(exp, k)
    return out


def _unusable(exp: Any, at: Any, label: str, N: int, known: tuple) -> bool:
    """Whether some claim reads the cell (label, N) and none's verdict changes with it, for every
    fill of the cells not finished (the module's rule)."""
    read = False
    for fill_lo in FILLS:
        for fill in FILLS:
            runs = [_claims(exp, at, label, N, v, fill_lo, fill, *known) for v in PROBES]
            if any(r is None for r in runs):  # a claim could not read the probe: the cell trains
                return False
            if len({tuple(c.held for c in r) for r in runs}) > 1:  # type: ignore[union-attr]
                return False
            read = read or len({tuple(c.text for c in r) for r in runs}) > 1  # type: ignore[union-attr]
    return read


def _claims(exp: Any, at: Any, label: str, N: int, v: float | None, fill_lo: float, fill: float,
            points: dict, extra: dict, base: dict, table: dict) -> list | None:
    """The claims with the cell (label, N) scoring `v` and every cell not finished scoring
    `fill_lo` at the shortest length, `fill` elsewhere; None where a claim cannot read them."""
    lo = min(at.Ns)

    def hit(key: Any) -> bool:
        return tuple(key[:2]) == (label, N)

    def filled(key: Any) -> Any:
        return _point(fill_lo if key[1] == lo else fill)

    exp.points = _Probe(points, hit, _point(v), filled)
    exp.extra = _Probe(extra, hit, _point(v), filled)
    exp.best_trivial = _Probe(base, lambda _k: False, None, lambda _k: 0.5)
    rows = _Probe({}, lambda _k: False, None,
                  lambda lab: _Probe(table.get(lab, {}), lambda k: lab == label and k[0] == N, v,
                                     lambda k: fill_lo if k[0] == lo else fill))
    try:
        return exp.claims(rows, at)
    except (TypeError, KeyError, ValueError, ZeroDivisionError, AttributeError):
        return None
