"""A sweep file's `[search]` table read into a `Search` (`sweeps.search`: what the table means;
`docs/sweeps.md`: the table's fields): every value checked, each mistake one line naming its field,
each searched arm's trials drawn, and every trial's run built before anything runs."""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable

from ..config import RunConfig
from ..errors import ArchsepError, closest
from .flat import _check_table, _describe, _nest
from .search import Cell, Search, Settle, draw

SEARCH_KEYS = ("steps", "keep", "trials", "seed", "tie", "settle", "axes", "arms")
SETTLE_KEYS = ("level", "at")
SEARCHABLE = ("train", "model_params")  # a cell's task is not searched: its parameters are grid axes
NOT_SEARCHED = ("train.budget", "train.halving_lrs", "train.halving_rungs", "train.device")


def _int_list(v: Any, field_: str, where: str) -> tuple[int, ...]:
    ok = isinstance(v, list) and bool(v) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v)
    if not ok or list(v) != sorted(set(v)):
        raise ArchsepError(f"{where}: {field_}: expected increasing step counts >= 1, e.g. [2000, 8000, 32000], "
                           f"got {v!r}")
    return tuple(v)


def _space(table: Any, loc: str, where: str, check: Callable[[str, Any, str], Any]) -> dict[str, list]:
    if not isinstance(table, dict):
        raise ArchsepError(f"{where}: {loc}: expected a table of axes, e.g. {{ \"train.lr\" = [1e-3, 1e-4] }}, "
                           f"got {table!r}")
    out: dict[str, list] = {}

    def walk(prefix: str, t: dict) -> None:
        for k, v in t.items():
            key = f"{prefix}{k}"
            head = key.split(".")[0]
            if isinstance(v, dict) and head in SEARCHABLE and "." not in key:
                walk(key + ".", v)
                continue
            if head not in SEARCHABLE or key.count(".") != 1:
                raise ArchsepError(f"{where}: {loc}.{key}: a search varies 'train.X' or 'model_params.X'"
                                   f"{closest(head, SEARCHABLE) if head not in SEARCHABLE else ''}; "
                                   "the task's parameters are the grid's (cells)")
            if key in NOT_SEARCHED:
                why = ("search.steps sets every run's budget" if key == "train.budget" else
                       "a search is its own schedule" if "halving" in key else "not part of a run")
                raise ArchsepError(f"{where}: {loc}.{key}: not searched ({why})")
            if not isinstance(v, list) or not v:
                raise ArchsepError(f"{where}: {loc}.{key}: expected a non-empty list of values, got {v!r}")
            out[key] = [check(key, x, f"{loc}.{key}[{i}]") for i, x in enumerate(v)]
            if len(set(map(repr, out[key]))) != len(out[key]):
                raise ArchsepError(f"{where}: {loc}.{key}: a value given twice in {v!r}")

    walk("", table)
    return out


def _tie(doc: dict, where: str) -> float:
    tie = doc.get("tie", 0.0)
    if isinstance(tie, bool) or not isinstance(tie, (int, float)) or not 0 <= tie <= 10:
        raise ArchsepError(f"{where}: search.tie: expected how many standard errors of the last kept trial's "
                           f"held-out error another may be within and go on too, a number in [0, 10] (0: none), "
                           f"got {tie!r}")
    return float(tie)


def _settle(doc: dict, axes: dict[str, list], where: str) -> Settle | None:
    """`[search.settle]`, checked: `level` in (0, 1], `at` a table of grid axes and their values."""
    if "settle" not in doc:
        return None
    t = doc["settle"]
    eg = '{ level = 0.95, at = { "task_params.N" = 20 } }'
    if not isinstance(t, dict):
        raise ArchsepError(f"{where}: search.settle: expected a table, e.g. {eg}, got {t!r}")
    _check_table(t, "search.settle", SETTLE_KEYS, where)
    level = t.get("level")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level <= 1:
        raise ArchsepError(f"{where}: search.settle.level: expected the control's level, a mean test accuracy "
                           f"in (0, 1], got {level!r}")
    at = t.get("at")
    if not isinstance(at, dict) or not at:
        raise ArchsepError(f"{where}: search.settle.at: expected a table of grid axes and their values, e.g. "
                           f'{{ "task_params.N" = 20 }}, got {at!r}')
    for k, v in at.items():
        if k not in axes:
            raise ArchsepError(f"{where}: search.settle.at.{k}: not a grid axis{closest(k, list(axes))}; "
                               f"axes: {', '.join(axes) or 'none'}")
        if v not in axes[k]:
            raise ArchsepError(f"{where}: search.settle.at.{k}: {v!r} is not one of the grid's values "
                               f"{axes[k]!r}")
    return Settle(float(level), dict(at))


def _numbers(doc: dict, where: str) -> tuple[tuple[int, ...], float, int, int]:
    for k in ("steps", "trials", "keep"):
        if k not in doc:
            raise ArchsepError(f"{where}: search.{k}: missing (see [search] in docs/sweeps.md)")
    steps = _int_list(doc["steps"], "search.steps", where)
    keep = doc["keep"]
    if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0 < keep < 1:
        raise ArchsepError(f"{where}: search.keep: expected the share of trials that goes on at a rung, "
                           f"a number in (0, 1), got {keep!r}")
    trials = doc["trials"]
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ArchsepError(f"{where}: search.trials: expected a count >= 1 of configurations per arm, got {trials!r}")
    seed = doc.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ArchsepError(f"{where}: search.seed: expected an integer >= 0, got {seed!r}")
    return steps, float(keep), trials, seed


def _spaces(doc: dict, labels: list, axes: dict, where: str, check: Callable) -> dict[str, dict[str, list]]:
    common = _space(doc.get("axes", {}), "search.axes", where, check)
    arm_tables = doc.get("arms", {})
    names = ", ".join(map(str, labels))
    if not isinstance(arm_tables, dict) or not arm_tables:
        raise ArchsepError(f"{where}: search.arms: expected a table naming the searched arms by label, e.g. "
                           f"[search.arms.LSTM]; labels: {names}")
    spaces: dict[str, dict[str, list]] = {}
    for lab, t in arm_tables.items():
        if lab not in labels:
            raise ArchsepError(f"{where}: search.arms.{lab}: no arm is labelled '{lab}'"
                               f"{closest(lab, [str(x) for x in labels])}; labels: {names}")
        own = _space(t, f"search.arms.{lab}", where, check)
        both = sorted(set(own) & set(common))
        if both:
            raise ArchsepError(f"{where}: search.arms.{lab}.{both[0]}: also an axis of search.axes; give it once")
        spaces[lab] = {**common, **own}
        for key in spaces[lab]:
            if key in axes:
                raise ArchsepError(f"{where}: search: '{key}' is both searched and a grid axis (a cell); keep one")
    return spaces


def plan(doc: Any, base: dict, arms: list[dict], labels: list, axes: dict[str, list], seeds: list[int] | None,
         where: str, check: Callable[[str, Any, str], Any], device: str | None = None) -> Search:
    """The search of a sweep file's `[search]` table (`doc`), over its base, arms and grid
    (checked by `sweeps.file.parse`); `check(key, value, loc)` type-checks one value."""
    _check_table(doc, "search", SEARCH_KEYS, where)
    steps, keep, trials, seed = _numbers(doc, where)
    spaces = _spaces(doc, labels, axes, where, check)
    for loc, flat in [("base", base), *((f"arms[{i}]", a) for i, a in enumerate(arms)), ("grid", axes)]:
        for key in ("train.budget", "train.halving_lrs", "train.halving_rungs"):
            if key in flat:
                raise ArchsepError(f"{where}: {loc}.{key}: a search sets every run's budget (search.steps) and is "
                                   "its own schedule; remove it")
    sizes = {lab: math.prod(len(v) for v in s.values()) for lab, s in spaces.items()}
    small = min(sizes, key=lambda k: sizes[k])
    if trials > sizes[small]:
        raise ArchsepError(f"{where}: search.trials: {trials} is more than the {sizes[small]} configuration(s) of "
                           f"arm '{small}''s space; at most {sizes[small]} (every searched arm draws as many)")
    seeds = list(seeds) if seeds is not None else [base.get("seed", 0)]
    keys = list(axes)
    cells: list[Cell] = []
    for a, arm in enumerate(arms):
        lab = labels[a]
        for combo in itertools.product(*(axes[k] for k in keys)):
            point = dict(zip(keys, combo))
            flat = {k: v for k, v in {**base, **arm, **point}.items() if k != "seed"}
            if lab in spaces:
                flats = [{**flat, **p} for p in draw(spaces[lab], trials, seed, str(lab))]
                cells.append(Cell(str(lab), point, flats, True, spaces[lab]))
            else:
                cells.append(Cell(str(lab), point, [flat], False))
    batch: dict[int, int] = {}
    for c, cell in enumerate(cells):
        for flat in cell.flats:
            desc = _describe({**flat, "label": cell.label}, keys + list(cell.space) + ["label"])
            try:
                tc = RunConfig.from_dict(_nest({**flat, "seed": seeds[0]})).train
            except (ArchsepError, TypeError, ValueError) as e:
                raise ArchsepError(f"{where}: run {desc}: {e}") from None
            if tc.eval_mode != "every":
                raise ArchsepError(f"{where}: run {desc}: train.eval_mode: a search needs 'every' (a trial goes on "
                                   f"from its end at the rung before, and the progressive schedule looks at a "
                                   f"run's last step), got '{tc.eval_mode}'")
            bad = [s for s in steps if s % tc.eval_every]
            if bad:
                raise ArchsepError(f"{where}: search.steps: {bad[0]} is not a multiple of train.eval_every = "
                                   f"{tc.eval_every} (a rung reads the held-out metric at its last step)")
            batch[c] = tc.batch_size
    settle = _settle(doc, axes, where)
    for cell in cells:
        if settle is not None and cell.searched and settle.applies(cell) and \
                RunConfig.from_dict(_nest({**cell.flats[0], "seed": seeds[0]})).build_task().kind == "regression":
            raise ArchsepError(f"{where}: search.settle: cell {cell.name}'s task is scored by an MSE, not an error "
                               "rate; a control is settled on a test accuracy (1 - the error rate)")
    out = Search(steps, keep, trials, seed, tuple(seeds), cells, batch, device, _tie(doc, where), settle)
    seen: dict[str, str] = {}
    for c, cell in enumerate(cells):
        for t in range(len(cell.flats)):
            rid = out.config(c, t, 0).run_id
            desc = f"{cell.name} trial {t}"
            if rid in seen:
                raise ArchsepError(f"{where}: runs {seen[rid]} and {desc} are the same run (same canonical config)")
            seen[rid] = desc
    return out
