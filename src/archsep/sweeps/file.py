"""Sweep files: a grid of runs declared in TOML, validated before anything runs.

    name = "tf-vs-ffn"            # optional, default: the file name
    imports = ["./mytask.py"]     # optional: plugins (modules or files) that register tasks/archs
    seeds = 3                     # 3 -> seeds 0, 1, 2; or a list: [0, 7, 9]
    [base]                        # fields every run shares (any RunConfig field)
    task = "qstr"
    task_params = { d = 10, q = 1 }
    train = { budget = 4000, eval_size = 200 }
    [[arms]]                      # alternatives that change several fields together
    label = "TF"
    arch = "tf-b"
    model_params = { mlp_width = 32 }
    [[arms]]
    label = "FFN"
    arch = "ffn"
    [grid]                        # the cartesian product of these axes
    "task_params.N" = [2, 3, 4]   # dotted keys reach into task_params / model_params / train
    train.lr = [1e-3, 3e-4]       # (TOML dotted keys work as well)
    [analysis]                    # optional: what the report fits and compares
    x = "task_params.N"           # the scaling variable of samples ~ x^alpha
    separations = [["TF", "FFN"]] # (better, worse): is alpha_worse - alpha_better > 0?
    # measure = "size"            # or: test accuracy per (model, width, x) cell, lr chosen on
    # width = "model_params.hidden"  # validation (the model parameter that is the width)

The runs are arms x grid x seeds. Every key is checked against the config fields (an unknown
one is named with the closest valid key), every value against its type, every axis for being
a non-empty list, and every run is built (so q > N or lr <= 0 fails here, not mid-sweep).

Writing a sweep file is `archsep.sweeps.toml`; a preset becomes a sweep in
`archsep.experiments.plan`.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from ..config import RunConfig, TrainConfig
from ..errors import ArchsepError, closest
from ..fileio import has_control
from ..registry import _coerce, init_fields
from ..store.analysis_table import RUN_KEYS, check_analysis
from .flat import _describe, _nest
from .match import Matcher
from .search import Search
from .search_plan import plan as plan_search

PARAM_TABLES = ("task_params", "model_params", "train")

TOP_KEYS = ("name", "description", "imports", "seeds", "base", "arms", "grid", "match", "analysis", "search")
MAX_RUNS = 100_000  # runs per sweep
MAX_FILE_BYTES = 2_000_000  # a sweep file's size
PROGRESS_FROM = 5_000  # plans of this many runs show a progress line while they are built


@dataclass
class Sweep:
    name: str
    configs: list[RunConfig]
    source: str  # the TOML text (a preset's is generated)
    origin: str  # file path or "preset:NAME"
    preset: str | None = None
    quick: bool = False
    analysis: dict = field(default_factory=dict)
    matches: list[dict] = field(default_factory=list)  # [match]: each matched arm's width per grid point
    # [search] (`sweeps.search`): then `configs` are what runs first (the first rung's trials and
    # the arms not searched), and `runs.search` runs the rest
    search: Search | None = None

    @property
    def sweep_id(self) -> str:
        """Identity of the set of runs (not of the file's formatting)."""
        ids = sorted(c.run_id for c in self.configs)
        return hashlib.sha256(json.dumps([self.name, ids]).encode()).hexdigest()[:16]


# --- loading ---------------------------------------------------------------------------------
def is_file_spec(spec: str | Path) -> bool:
    """Whether a sweep spec names a file (it ends in .toml or exists) rather than a preset."""
    path = Path(spec)
    return path.suffix.lower() == ".toml" or path.exists()


def load_file(spec: str | Path, device: str | None = None) -> Sweep:
    """A sweep from its TOML file, every run validated."""
    path = Path(spec)
    if not path.exists():
        raise ArchsepError.at("sweep_file", f"sweep file '{path}' does not exist")
    if path.is_dir():
        raise ArchsepError.at("sweep_file", f"'{path}' is a directory, not a sweep file")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:  # refused before parsing: TOML of this size takes long to read
            raise ArchsepError.at("sweep_file", f"sweep file '{path}' is {size / 1e6:.1f} MB, more than the limit of "
                               f"{MAX_FILE_BYTES / 1e6:.0f} MB (a grid of {MAX_RUNS} runs fits in far less); "
                               "split the sweep")
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ArchsepError.at("sweep_file", f"cannot read '{path}': {getattr(e, 'strerror', None) or e}") from None
    return parse(text, origin=str(path), default_name=path.stem, device=device)


def check_label(label: Any, loc: str) -> None:
    """A label is printable text: no control characters (ESC, BEL, newline, NUL: it is printed to
    terminals) and no '$' (matplotlib would read $...$ in a legend as math)."""
    if not isinstance(label, str):
        return  # the type check names it
    if has_control(label):
        raise ArchsepError(f"{loc}: expected printable text without control characters, got {label!r}")
    if "$" in label:
        raise ArchsepError(f"{loc}: '$' is not allowed in a label (figures would read $...$ as math), got {label!r}")


def _int_typed(tp: Any) -> bool:
    """An integer field (int, or int | None), where a float is a mistake, not a value."""
    args = typing.get_args(tp) if typing.get_origin(tp) is not None else (tp,)
    return int in args and float not in args


MAX_DEPTH = 8  # tables and arrays inside one another: a sweep needs 5 ([grid] axis of lists in a table)


def _too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Nesting deeper than `limit`, found without recursion (a 10^5-deep array is one line)."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            if d >= limit:
                return True
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


def _loads(text: str, what: str) -> dict:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ArchsepError(f"{what}: not valid TOML: {e}") from None
    except RecursionError:
        doc = None
    if doc is None or _too_deep(doc):
        raise ArchsepError(f"{what}: tables or arrays nested deeper than {MAX_DEPTH} levels; a sweep needs fewer")
    return doc


def parse(text: str, origin: str = "<sweep>", default_name: str = "sweep", device: str | None = None,
          replace: dict[str, Any] | None = None) -> Sweep:
    """A sweep from its TOML text; `replace` sets top-level tables of the file before it is read
    (a preset's search file at the scale's lengths: {"grid": {...}, "name": ...})."""
    doc = {**_loads(text, origin), **(replace or {})}
    where = origin
    for key in doc:
        if key not in TOP_KEYS:
            raise ArchsepError(f"{where}: unknown key '{key}'{closest(key, TOP_KEYS)}; allowed: {', '.join(TOP_KEYS)}")
    imports = doc.get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise ArchsepError(f"{where}: imports: expected a list of module names or paths, got {imports!r}")
    from .. import plugins

    here = Path(origin).parent if Path(origin).is_file() else Path.cwd()
    for spec in imports:  # before any name is checked: the plugins register tasks and archs
        plugins.load(spec, base=here, field=f"{where}: imports")
    name = doc.get("name", default_name)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,99}", name):
        raise ArchsepError(f"{where}: name: expected a short name of letters, digits, '_.+-', not starting "
                           f"with '.' (it names the directory results/NAME), got {name!r}")
    base = _flat_run(doc.get("base", {}), "base", where)
    arms_doc = doc.get("arms", [{}])
    if not isinstance(arms_doc, list) or not all(isinstance(a, dict) for a in arms_doc):
        raise ArchsepError(f"{where}: arms: expected an array of tables ([[arms]]), got {arms_doc!r}")
    if not arms_doc:
        raise ArchsepError(f"{where}: arms: empty array of arms")
    arms = [_flat_run(a, f"arms[{i}]", where) for i, a in enumerate(arms_doc)]
    axes = _axes(doc.get("grid", {}), where)
    seeds = _seeds(doc.get("seeds"), where)
    if seeds is not None and ("seed" in axes or "seed" in base or any("seed" in a for a in arms)):
        raise ArchsepError(f"{where}: seeds: given both 'seeds' and a 'seed' field; keep one")
    analysis = _analysis(doc.get("analysis", {}), where)
    # the size first: a huge grid is refused in a moment, before any value is checked or run built
    n = len(arms) * math.prod(len(v) for v in axes.values()) * len(seeds or [0])
    if n > MAX_RUNS:
        sizes = " x ".join([f"{len(arms)} arm(s)"] + [f"{len(v)} {k}" for k, v in axes.items()]
                           + ([f"{len(seeds)} seeds"] if seeds else []))
        raise ArchsepError(f"{where}: grid: {n} runs ({sizes}) is more than the limit of {MAX_RUNS} runs "
                           "per sweep; split the sweep")
    labels = labels_of(base, arms)

    def arch_of(a: dict) -> object:  # what a label names (its parameters may vary, e.g. heads = q)
        return {**base, **a}.get("arch")

    for i, lab in enumerate(labels):
        j = labels.index(lab)
        if j < i and arch_of(arms[i]) != arch_of(arms[j]):
            raise ArchsepError(f"{where}: arms[{i}].label: '{lab}' already names arms[{j}], another architecture "
                               f"({arch_of(arms[j])} vs {arch_of(arms[i])}); labels must be unique per architecture")

    # check every key and value against the classes it can meet, before building anything
    tasks = _values_of("task", base, arms, axes)
    archs = _values_of("arch", base, arms, axes)
    _check_names(tasks, archs, where)
    for loc, flat in [("base", base), *((f"arms[{i}]", a) for i, a in enumerate(arms))]:
        for k, v in flat.items():
            flat[k] = _check_value(k, v, f"{loc}.{k}", tasks, archs, where)
    for k, values in axes.items():
        axes[k] = [_check_value(k, v, f"grid.{k}[{i}]", tasks, archs, where) for i, v in enumerate(values)]

    if "search" in doc:
        if "match" in doc:
            raise ArchsepError(f"{where}: match: a search chooses each arm's size itself; drop [match] or [search]")
        search = plan_search(doc["search"], base, arms, labels, axes, seeds, where,
                             lambda k, v, loc: _check_value(k, v, loc, tasks, archs, where), device)
        _check_separations(analysis, set(map(str, labels)), where)
        return Sweep(name, search.first_rung(), text, origin, analysis=analysis, search=search)
    matcher = Matcher(doc["match"], base, arms, labels, where) if "match" in doc else None
    configs: list[RunConfig] = []
    seen: dict[str, str] = {}
    keys = list(axes)
    bar = None
    if n >= PROGRESS_FROM:  # building and checking a run takes about half a millisecond
        import sys

        from tqdm import tqdm

        print(f"{where}: planning {n} runs (about {max(1, round(n * 5e-4))} s)", file=sys.stderr, flush=True)
        bar = tqdm(total=n, desc="planning", unit="run", file=sys.stderr, dynamic_ncols=True, mininterval=1.0)
    try:
        for a, arm in enumerate(arms):
            for combo in itertools.product(*(axes[k] for k in keys)):
                point = {**base, **arm, **dict(zip(keys, combo))}
                if matcher is not None:
                    point = matcher.matched(a, point, dict(zip(keys, combo)))
                for seed in (seeds if seeds is not None else [point.get("seed", 0)]):
                    flat = {**point, "seed": seed}
                    if device is not None:
                        flat["train.device"] = device
                    desc = _describe(flat, keys + ["seed"] + (["label"] if len(arms) > 1 else []))
                    try:
                        cfg = RunConfig.from_dict(_nest(flat))
                    except ArchsepError as e:
                        raise ArchsepError(f"{where}: run {desc}: {e}") from None
                    except (TypeError, ValueError) as e:  # a model/task rejecting a combination
                        raise ArchsepError(f"{where}: run {desc}: {e}") from None
                    rid = cfg.run_id
                    if rid in seen:
                        raise ArchsepError(f"{where}: runs {seen[rid]} and {desc} are the same run (same canonical "
                                           f"config; labels and devices are not part of a run's identity)")
                    seen[rid] = desc
                    configs.append(cfg)
                    if bar is not None:
                        bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    if not configs:
        raise ArchsepError(f"{where}: grid: the sweep has no runs")
    _check_separations(analysis, {c.label or c.arch for c in configs}, where)
    return Sweep(name, configs, text, origin, analysis=analysis, matches=matcher.found if matcher else [])


def _check_separations(analysis: dict, known: set, where: str) -> None:
    for i, pair in enumerate(analysis["separations"]):
        for lab in pair:
            if lab not in known:
                raise ArchsepError(f"{where}: analysis.separations[{i}]: no arm is labelled '{lab}'"
                                   f"{closest(lab, [str(k) for k in known])}; labels: "
                                   f"{', '.join(sorted(map(str, known)))}")


def labels_of(base: dict, arms: list[dict]) -> list:
    return [a.get("label", a.get("arch", base.get("label", base.get("arch")))) for a in arms]


def _flat_run(table: Any, loc: str, where: str) -> dict[str, Any]:
    """{'task': 'qstr', 'train': {'lr': 1e-3}} -> {'task': 'qstr', 'train.lr': 1e-3}."""
    if not isinstance(table, dict):
        raise ArchsepError(f"{where}: {loc}: expected a table, got {table!r}")
    out: dict[str, Any] = {}
    for k, v in table.items():
        if k not in RUN_KEYS:
            raise ArchsepError(f"{where}: {loc}.{k}: unknown key{closest(k, RUN_KEYS)}; allowed: {', '.join(RUN_KEYS)}")
        if k in PARAM_TABLES:
            if not isinstance(v, dict):
                raise ArchsepError(f"{where}: {loc}.{k}: expected a table of parameters, got {v!r}")
            for pk, pv in v.items():
                out[f"{k}.{pk}"] = pv
        else:
            out[k] = v
    return out


def _axes(grid: Any, where: str) -> dict[str, list]:
    if not isinstance(grid, dict):
        raise ArchsepError(f"{where}: grid: expected a table of axes, got {grid!r}")
    out: dict[str, list] = {}

    def walk(prefix: str, t: dict) -> None:
        for k, v in t.items():
            key = f"{prefix}{k}"
            parts = key.split(".")
            head = parts[0]
            if head not in RUN_KEYS:
                raise ArchsepError(f"{where}: grid.{key}: unknown key '{head}'{closest(head, RUN_KEYS)}; "
                                   f"allowed: {', '.join(RUN_KEYS)}")
            if isinstance(v, dict) and head in PARAM_TABLES and len(parts) == 1:
                walk(key + ".", v)
                continue
            if head in PARAM_TABLES and len(parts) != 2:
                raise ArchsepError(f"{where}: grid.{key}: expected '{head}.PARAM', e.g. grid.\"{head}.N\"")
            if head not in PARAM_TABLES and len(parts) != 1:
                raise ArchsepError(f"{where}: grid.{key}: '{head}' has no sub-fields")
            if not isinstance(v, list):
                raise ArchsepError(f"{where}: grid.{key}: expected a list of values (an axis), got {v!r}")
            if not v:
                raise ArchsepError(f"{where}: grid.{key}: empty axis (give at least one value)")
            if key in out:
                raise ArchsepError(f"{where}: grid.{key}: axis given twice")
            out[key] = v

    walk("", grid)
    return out


def _seeds(v: Any, where: str) -> list[int] | None:
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 1:
            raise ArchsepError(f"{where}: seeds: expected a count >= 1 or a list of seeds, got {v}")
        return list(range(v))
    if isinstance(v, list):
        if not v:
            raise ArchsepError(f"{where}: seeds: empty list of seeds")
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in v):
            raise ArchsepError(f"{where}: seeds: expected non-negative integers, got {v!r}")
        if len(set(v)) != len(v):
            raise ArchsepError(f"{where}: seeds: repeated seed in {v!r}")
        return list(v)
    raise ArchsepError(f"{where}: seeds: expected a count or a list of seeds, got {v!r}")


def _analysis(a: Any, where: str) -> dict:
    """The `[analysis]` table, checked by its one schema (`store.analysis_table`)."""
    if not isinstance(a, dict):
        raise ArchsepError(f"{where}: analysis: expected a table, got {a!r}")

    def fail(field: str, why: str) -> NoReturn:
        raise ArchsepError(f"{where}: {field}: {why}")

    return check_analysis(a, fail)


def _values_of(key: str, base: dict, arms: list[dict], axes: dict) -> list[str]:
    vals = []
    if key in base:
        vals.append(base[key])
    vals += [a[key] for a in arms if key in a]
    vals += axes.get(key, [])
    return vals


def _check_names(tasks: list, archs: list, where: str) -> None:
    from ..models import MODELS
    from ..tasks import TASKS

    if not tasks:
        raise ArchsepError(f"{where}: task: missing (set it in [base], an arm or the grid)")
    if not archs:
        raise ArchsepError(f"{where}: arch: missing (set it in [base], an arm or the grid)")
    for reg, vals, what in ((TASKS, tasks, "task"), (MODELS, archs, "arch")):
        for v in vals:
            if not isinstance(v, str):
                raise ArchsepError(f"{where}: {what}: expected a name, got {v!r}")
            try:
                reg.get(v)
            except ArchsepError as e:
                raise ArchsepError(f"{where}: {e}") from None


def _fields_of(cls: type) -> dict[str, Any]:
    return init_fields(cls)


def _check_value(key: str, value: Any, loc: str, tasks: list[str], archs: list[str], where: str) -> Any:
    """Type-check one value of `key` (a run field or a dotted parameter); names an unknown
    parameter with the closest one any of the sweep's tasks/archs has."""
    from ..models import MODELS
    from ..tasks import TASKS

    head, _, sub = key.partition(".")
    if head == "train":
        classes: list[type] = [TrainConfig]
    elif head == "task_params":
        classes = [TASKS.get(t) for t in dict.fromkeys(tasks)]
    elif head == "model_params":
        classes = [MODELS.get(a) for a in dict.fromkeys(archs)]
    else:
        classes = []
        sub = head
    if classes:  # one name may have different types in different archs (ffn vs rnn 'hidden')
        types = [f[sub] for f in map(_fields_of, classes) if sub in f]
        allowed = sorted({k for c in classes for k in _fields_of(c)})
    else:
        types = [{"task": str, "arch": str, "label": str, "seed": int}.get(sub)] if sub in RUN_KEYS else []
        allowed = sorted(RUN_KEYS)
    if not types:
        raise ArchsepError(f"{where}: {loc}: unknown key '{sub}'{closest(sub, allowed)}; "
                           f"allowed in {head}: {', '.join(allowed)}")
    errors = []
    for tp in types:
        try:
            v = _coerce(key, value, tp)
            break
        except ArchsepError as e:
            errors.append(e)
    else:
        raise ArchsepError(f"{where}: {loc}: {str(errors[0]).split(': ', 1)[-1]}") from None
    if sub == "seed" and head == "seed" and v < 0:
        raise ArchsepError(f"{where}: {loc}: seed must be >= 0, got {v}")
    if sub == "label" and head == "label":
        check_label(v, f"{where}: {loc}")
    return v
