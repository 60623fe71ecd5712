"""One analysis of a grid of runs, used by every sample-complexity experiment and by `archsep
report` / `archsep.analyze`: runs -> curves (a typed `CurveKey`, never a label string to split)
-> points (per curve and x: mean and median samples with intervals) -> fits (the exponent alpha
of samples ~ x^alpha per curve) -> separations (for each (better, worse) pair of curves)."""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from ..config import RunConfig, arm_of
from ..results import RunResult
from ..sweeps.toml import flatten_config
from .separation import separation
from .stats import fit_exponent, summarize_point

SAMPLES_STATUSES = ("ok", "censored")  # runs whose sample count enters a point and a fit


@dataclass(frozen=True, order=True)
class CurveKey:
    """What makes a curve: the run's label (its arch where it has none), the held-out protocol
    it was measured under, its task where a grid mixes tasks, and the other fields that vary
    within one label ((dotted field, JSON value) pairs, e.g. ("model_params.width", "64"))."""

    label: str
    protocol: str = "training"
    task: str = ""
    extras: tuple[tuple[str, str], ...] = ()

    @property
    def arm(self) -> str:
        """The architecture the curve measures, without its protocol's suffix."""
        return arm_of(self.label, self.protocol)

    @property
    def name(self) -> str:
        """How tables and plots call the curve: "TF", "qstr/TF", "TF width=64"."""
        head = f"{self.task}/{self.label}" if self.task else self.label
        extra = " ".join(f"{k.split('.')[-1]}={json.loads(v)}" for k, v in self.extras)
        return f"{head} {extra}".strip()

    def to_dict(self) -> dict:
        return {"label": self.label, "arm": self.arm, "protocol": self.protocol, "task": self.task,
                "extras": {k: json.loads(v) for k, v in self.extras}}


@dataclass
class GridFit:
    """Per curve name: its points (JSON-safe dicts), its fit, the samples behind them."""

    keys: dict[str, CurveKey]
    points: list[dict]
    fits: dict[str, dict]
    samples: dict[str, dict[Any, np.ndarray]]
    censored: dict[str, dict[Any, np.ndarray]]

    def separations(self, pairs: Iterable[tuple[str, str]]) -> list[dict]:
        """For each (better, worse): whether worse's exponent is larger (censoring-aware); a
        name matches a curve's name or, when exactly one curve has it, its label or arm."""
        out = []
        for better, worse in pairs:
            b, w = self.match(better), self.match(worse)
            if b is None or w is None:
                missing = "/".join(n for n, m in ((better, b), (worse, w)) if m is None)
                out.append({"better": better, "worse": worse, "held": False,
                            "text": f"{better} vs {worse}: no data for {missing}"})
                continue
            cens_b, cens_w = self.censored[b], self.censored[w]
            s = separation(better, self.samples[b], worse, self.samples[w],
                           censored=any(c.any() for c in (*cens_b.values(), *cens_w.values())),
                           censored_a=cens_b, censored_b=cens_w)
            out.append(s.to_dict())
        return out

    def match(self, name: str) -> str | None:
        if name in self.samples:
            return name
        hits = [c for c, k in self.keys.items() if c in self.samples and name in (k.label, k.arm)]
        return hits[0] if len(hits) == 1 else None


def fit_grid(groups: dict[CurveKey, dict[Any, list[RunResult]]], budget: int | None = None,
             min_points: int = 0) -> GridFit:
    """Points and exponent fits of grouped runs ({curve: {x: runs}}): the one place a grid's
    exponents are fitted. A point's budget is the largest its runs were given (else `budget`);
    a curve is fitted over its positive numeric x with usable runs, when it has `min_points`."""
    keys: dict[str, CurveKey] = {}
    points: list[dict] = []
    fits: dict[str, dict] = {}
    samples: dict[str, dict[Any, np.ndarray]] = {}
    censored: dict[str, dict[Any, np.ndarray]] = {}
    for key in sorted(groups):
        name = key.name
        keys[name] = key
        samples[name], censored[name] = {}, {}
        for xk in sorted(groups[key], key=_x_order):
            rs = groups[key][xk]
            xv = xk.value if isinstance(xk, _Hashable) else xk
            point_budget = max((int(b) for r in rs if (b := (r.config.get("train") or {}).get("budget"))),
                               default=budget)
            p = summarize_point(name, xv, [r.samples for r in rs], [r.status for r in rs], point_budget).to_dict()
            p["x"], p["curve"] = xv, key.to_dict()
            points.append(p)
            ok = [r for r in rs if r.status in SAMPLES_STATUSES and r.samples]
            if isinstance(xv, (int, float)) and not isinstance(xv, bool) and xv > 0 and ok:
                samples[name][xv] = np.array([r.samples for r in ok], float)
                censored[name][xv] = np.array([r.status == "censored" for r in ok], bool)
        if len(samples[name]) >= min_points:
            fits[name] = fit_exponent(samples[name], censored[name]).to_dict()
    return GridFit(keys, points, fits, samples, censored)


def group(results: list[RunResult], key: Callable[[RunResult], CurveKey],
          x: Callable[[RunResult], Any]) -> dict[CurveKey, dict[Any, list[RunResult]]]:
    g: dict[CurveKey, dict[Any, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        g[key(r)][x(r)].append(r)
    return g


def label_key(r: RunResult) -> CurveKey:
    """A preset's curve: the run's label and protocol (a preset's arms differ in nothing else)."""
    c = r.config
    return CurveKey(c.get("label") or c["arch"], (c.get("train") or {}).get("heldout", "training"))


# --- any grid: the curves are what the runs' configs say -------------------------------------
def flat(r: RunResult) -> dict[str, Any]:
    """A stored run's config as dotted fields (those away from their defaults)."""
    try:
        return flatten_config(RunConfig.from_dict(r.config))
    except Exception:  # noqa: BLE001 - a stored config this version cannot rebuild: use it raw
        c = r.config
        out = {"task": c.get("task"), "arch": c.get("arch"), "label": c.get("label", ""), "seed": c.get("seed")}
        for t in ("task_params", "model_params", "train"):
            out.update({f"{t}.{k}": v for k, v in (c.get(t) or {}).items()})
        return out


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


def analyze_runs(results: list[RunResult], x: str = "task_params.N", separations: list | None = None) -> dict:
    """Points, fits and separations of any runs, their curves read from what varies in their
    configs (a JSON-safe dict: x, varying, points, fits, separations, curves, curve_fields,
    metric, names)."""
    flats = [flat(r) for r in results]
    varying, curve_fields, curve_of = curve_keys(flats, x)
    keys = {id(r): k for r, k in zip(results, curve_of)}
    xs = {id(r): f.get(x) for r, f in zip(results, flats)}
    g = group(results, lambda r: keys[id(r)], lambda r: _Hashable(xs[id(r)]))
    grid = fit_grid(g, min_points=2)
    described = describe_runs(results)
    return {"x": x, "varying": varying, "points": grid.points, "fits": grid.fits,
            "separations": grid.separations([tuple(s) for s in separations or []]),
            "curves": list(grid.keys), "curve_fields": curve_fields, "metric": described["metric"],
            "run_curves": {r.run_id: keys[id(r)].name for r in results},
            "names": {c: n for c, k in grid.keys.items() if (n := described["names"].get(k.arm))}}


def curve_keys(flats: list[dict[str, Any]], x: str | None) -> tuple[list[str], list[str], list[CurveKey]]:
    """The curves of runs given as their flat configs (`flat`): the fields that vary among them
    (but the seed and device), those that name a curve beyond its label (`_curve_fields`: all
    but x), and each run's CurveKey."""
    fields = sorted({k for f in flats for k in f} - {"seed", "train.device"})
    varying = [k for k in fields if len({_json(f.get(k)) for f in flats}) > 1]
    curve_fields = _curve_fields(flats, varying, x or "")
    keys = [CurveKey(f.get("label") or f.get("arch") or "?", f.get("train.heldout") or "training",
                     str(f.get("task")) if "task" in varying else "", tuple((k, _json(f.get(k))) for k in curve_fields))
            for f in flats]
    return varying, curve_fields, keys


class _Hashable:
    """A stored x value as a dictionary key (lists and dicts in a foreign store included)."""

    def __init__(self, value: Any) -> None:
        self.value, self._text = value, _json(value)

    def __hash__(self) -> int:
        return hash(self._text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Hashable) and other._text == self._text


def _x_order(v: Any) -> tuple:
    """Numbers in order, then any other stored value (text, lists: a foreign or odd store) by
    its JSON text, then null: values of mixed types never compare with each other."""
    if isinstance(v, _Hashable):
        v = v.value
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, v, "")
    return (2 if v is None else 1, 0, _json(v))


def _curve_fields(flats: list[dict], varying: list[str], x: str) -> list[str]:
    """Varying fields that name a curve beyond its label: those not fixed by (task, label, arch)
    and x (an arm's own model_params are part of what its label means; a field set by x, such as
    a width matched to the reference's parameters at each N or heads = q, is part of the point)."""
    out = []
    for k in varying:
        if k in (x, "label", "arch", "task", "seed"):
            continue
        per: dict[tuple, set] = defaultdict(set)
        for f in flats:
            per[(f.get("task"), f.get("label"), f.get("arch"), _json(f.get(x)))].add(_json(f.get(k)))
        if any(len(v) > 1 for v in per.values()):
            out.append(k)
    return out


# --- what runs are called --------------------------------------------------------------------
def describe_runs(results: list[RunResult]) -> dict:
    """What the figures call things: each arm's model ("RNN" -> "GRU-500") and the task's
    metric ("MSE", "error")."""
    names: dict[str, str] = {}
    metric = None
    for r in results:
        key = label_key(r)
        if key.arm not in names or metric is None:
            try:
                cfg = RunConfig.from_dict(r.config)
                names.setdefault(key.arm, cfg.model_config().short_name())
                metric = metric or cfg.build_task().metric_name
            except Exception:  # noqa: BLE001 - a plugin not importable here: no names, not a failure
                pass
    return {"names": names, "metric": metric or "metric"}  # a task not importable here: no name


def run_rows(results: list[RunResult], axis: str | None = None) -> list[dict]:
    """One row per run: the columns of runs.csv. `axis`: the task parameter a figure varies
    other than N (qstr-fig3's q), given a column of its own after N."""
    rows = []
    for r in results:
        c = r.config
        at = {axis: c["task_params"].get(axis)} if axis and axis != "N" else {}
        rows.append({"arch": c.get("label") or c["arch"], "N": c["task_params"].get("N"), **at, "seed": c["seed"],
                     "samples": r.samples, "censored": r.censored, "diverged": r.diverged,
                     "status": r.status, "resolution": r.resolution, "wall_s": round(r.wall_s, 3),
                     "params": r.params, "state_size": r.state_size, "best_metric": r.best_metric,
                     "run_id": r.run_id})
    return rows


def point_arm(point: dict) -> str:
    """The arm a summary point's curve measures (its label without the protocol's suffix), as
    the analysis keyed it (`CurveKey`); a point from before keys (a stored summary.json): its
    label less an "[as published]" suffix."""
    return (point.get("curve") or {}).get("arm") or arm_of(point["arch"], "as-published")
