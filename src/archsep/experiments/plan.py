"""A preset as a sweep: the runs of a registered experiment at one scale, with `--set`
overrides and `--only` arms applied (`archsep sweep P` and `archsep reproduce P` plan exactly
the same runs), and `load`, which takes either a sweep file or a preset's name."""
from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from ..config import RunConfig, TrainConfig
from ..errors import ArchsepError
from ..models import MODELS
from ..sweeps.file import (MAX_DEPTH, PARAM_TABLES, Sweep, _fields_of, _int_typed, _too_deep, check_label,
                          is_file_spec, load_file)
from ..sweeps.toml import _tv, flatten_config, to_toml
from ..tasks import TASKS
from .base import EXPERIMENTS, Experiment
from .size_search import SearchScale, search_sweep


def load(spec: str | Path, scale: str = "full", device: str | None = None,
         overrides: dict[str, Any] | None = None, extra: list[str] | None = None) -> Sweep:
    """A sweep from a TOML file, or from a preset's name (at `scale`, with `overrides` and the
    `extra` archs of `--with`)."""
    if is_file_spec(spec):
        if overrides:
            raise ArchsepError.at("set", "only with a preset; edit the sweep file instead")
        if extra:
            raise ArchsepError.at("with", "applies to the atlas preset only; a sweep file lists its own [[arms]]")
        return load_file(spec, device)
    return from_experiment(str(spec), scale, device, overrides, extra=extra)


def from_experiment(name: str, scale: str = "full", device: str | None = None,
                    overrides: dict[str, Any] | None = None, only: list[str] | None = None,
                    at: list[int] | None = None, extra: list[str] | None = None) -> Sweep:
    """The runs of a registered experiment (a preset) at one scale, as a sweep: `archsep sweep P`
    and `archsep reproduce P` plan exactly the same runs. `overrides` ({"train.weight_decay":
    0.1, ...}) sets a field of every run; `only` keeps the runs of these architecture labels
    (the same runs, same ids, as in the whole preset: the rest can be added later into the
    same store); `at` keeps the runs at these values of the figure's axis (`Experiment.axis`,
    e.g. N, or q for Figure 3), likewise; `extra` adds archs of one's own (a plugin's mixer) beside
    the atlas's (`--with`: `Atlas.with_archs`), adding runs and changing none."""
    try:
        exp = EXPERIMENTS.get(name)()
    except ArchsepError as e:
        raise ArchsepError(f"{e} (or give a sweep file ending in .toml)") from None
    return plan_sweep(exp, scale, device, overrides, only, at, extra)


def plan_sweep(exp: Experiment, scale: str = "full", device: str | None = None,
               overrides: dict[str, Any] | None = None, only: list[str] | None = None,
               at: list[int] | None = None, extra: list[str] | None = None) -> Sweep:
    """`from_experiment` of an experiment already built."""
    name = exp.registry_name
    if extra:  # --with: only a preset that plans arms of one's own (the atlas)
        with_archs = getattr(exp, "with_archs", None)
        if with_archs is None:
            raise ArchsepError.at("with", f"applies to the atlas preset only, not {name} (a mixer of one's own beside "
                                          "the atlas's, at matched parameters)")
        exp = with_archs(extra)
        extra = [a.label for a in exp.extra]  # type: ignore[attr-defined]
    exp.check_scale(scale)
    s = exp.scale(scale)
    if isinstance(s, SearchScale):  # "the paper's search": a sweep file with [search] (sweeps/search.py)
        if overrides or only:
            what = ", ".join(overrides) if overrides else ",".join(only or [])
            raise ArchsepError.at("set" if overrides else "only", f"{what}: {name} --scale {scale} is a search; its "
                                  "space is its sweep file's (--print-toml), which can be edited and run as a file")
        return search_sweep(name, scale, s, at, device)
    configs = exp.plan(scale, device or "auto")
    if overrides:
        configs = override_plan(configs, overrides, name)
    if only:
        configs = select_labels(configs, only)
    if at:
        configs = select_at(configs, at, exp.axis, name)
    part = ";".join(([",".join(only)] if only else []) + ([f"{exp.axis}={','.join(map(str, at))}"] if at else []))
    full_name = (name if scale == "full" else f"{name}-{scale}") + override_suffix(overrides) \
        + (f"-with={','.join(extra)}" if extra else "") + (f"-only={part}" if part else "")
    # the analysis finds --with's arms from the runs' labels: nothing more to keep for a re-analysis
    analysis: dict[str, Any] = {"separations": [list(s) for s in exp.separations], "scale": scale}
    with_text = "".join(f" --with {x}" for x in extra or [])
    source = to_toml(configs, name=full_name, analysis=analysis,
                     description=f"preset {name} --scale {scale}{with_text}")
    if overrides:  # kept with the sweep in the store (not in its TOML): the preset's analysis re-plans with them
        analysis = {**analysis, "overrides": dict(overrides)}
    return Sweep(full_name, configs, source, origin=f"preset:{name}", preset=name, quick=scale == "quick",
                 analysis=analysis)


def override(cfg: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """`cfg` with dotted fields set ("train.weight_decay", "model_params.hidden", "seed", ...)."""
    d = cfg.to_dict()
    for key, value in overrides.items():
        _check_set_value(cfg, key, value)
        head, _, sub = key.partition(".")
        if head in PARAM_TABLES and sub:
            d[head] = {**d[head], sub: value}
        elif head in ("task", "arch", "label", "seed") and not sub:
            d[head] = value
        else:
            raise ArchsepError.at("set", f"'{key}' is not a field; use task_params.X, model_params.X, train.X, "
                               "task, arch, label or seed")
    try:
        return RunConfig.from_dict(d)
    except ArchsepError as e:
        raise ArchsepError.at("set", f"{e}") from None


def override_plan(configs: list[RunConfig], overrides: dict[str, Any], preset: str = "PRESET") -> list[RunConfig]:
    """The runs of a plan with `overrides` applied, never fewer distinct runs than planned.

    The fields that define a plan's structure get their own meaning: `seed=S` shifts the seed
    list to start at S (seeds 0, 1 become S, S + 1: as many distinct seeds as planned); `label`
    is refused (labels name the arms: --only chooses among them); and any other field that would
    make two planned runs one (a grid axis such as task_params.N, an lr grid, the widths) is
    refused, naming the field and its planned values, rather than counting one run twice."""
    overrides = dict(overrides)
    what = f"preset {preset}"
    if "label" in overrides:
        labels = list(dict.fromkeys(c.arm for c in configs))
        raise ArchsepError.at("set", f"label: the labels name {what}'s arms ({', '.join(labels)}); choose arms with "
                           "--only, not --set")
    shift = overrides.pop("seed", None)
    if shift is not None:
        if not isinstance(shift, int) or isinstance(shift, bool) or shift < 0:
            raise ArchsepError.at("set", f"seed: expected a non-negative integer (the first seed), got {shift!r}")
        first = min((c.seed for c in configs), default=0)
        configs = [dataclasses.replace(c, seed=c.seed - first + shift) for c in configs]
    out = [override(c, overrides) for c in configs] if overrides else list(configs)
    before = len({c.run_id for c in configs})
    after = len({c.run_id for c in out})
    if after < before:
        flats = [flatten_config(c) for c in configs]
        axes = [k for k in overrides if len({_tv(f.get(k, "")) for f in flats}) > 1]
        named = "; ".join(f"{k} varies in {what} (values "
                          f"{', '.join(dict.fromkeys(_tv(f[k]) for f in flats if k in f))})"
                          for k in axes) or f"{what}'s runs differ in nothing else"
        raise ArchsepError.at("set", f"{', '.join(axes or overrides)}: would make {before} planned runs only {after} "
                           f"distinct ones ({named}); a grid axis is part of a preset's structure: to run other "
                           f"values, write the preset as a sweep file (archsep sweep {preset} --print-toml > my.toml), "
                           "edit its grid and run `archsep sweep my.toml`")
    return out


def _check_set_value(cfg: RunConfig, key: str, value: Any) -> None:
    """--set values are checked as they enter: labels printable, seeds >= 0, integer fields
    given integers (1e3 is a float in TOML: `--set train.budget=1e3` would silently become 1000)."""
    head, _, sub = key.partition(".")
    if head == "label" and not sub:
        check_label(value, "set: label")
    tp: Any = None
    if head == "seed" and not sub:
        tp = int
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise ArchsepError.at("set", f"seed: expected a non-negative integer, got {value}")
    elif head in PARAM_TABLES and sub:
        cls = {"train": lambda: TrainConfig, "task_params": lambda: TASKS.get(cfg.task),
               "model_params": lambda: MODELS.get(cfg.arch)}[head]()
        tp = _fields_of(cls).get(sub)
    if tp is not None and _int_typed(tp) and isinstance(value, float):
        raise ArchsepError.at("set", f"{key}: expected an integer, got {value!r}"
                           + (f" (write {int(value)})" if value.is_integer() else ""))


def select_labels(configs: list[RunConfig], only: list[str]) -> list[RunConfig]:
    labels = list(dict.fromkeys(c.arm for c in configs))
    for name in only:
        if name not in labels:
            raise ArchsepError.at("only", f"unknown architecture label '{name}'; this preset has: {', '.join(labels)}")
    return [c for c in configs if c.arm in only]


def select_at(configs: list[RunConfig], at: list[int], axis: str | None, preset: str = "PRESET") -> list[RunConfig]:
    """The runs at these values of the preset's axis (task_params[axis]): the same runs, same
    ids, as in the whole preset, so a long preset can be run a few points at a time into one
    store (e.g. Figure 3's RNN one q at a time)."""
    if axis is None:
        raise ArchsepError.at("at", f"preset {preset} has no single axis to choose points on; use --only, or a "
                                    "sweep file")
    planned = sorted({c.task_params[axis] for c in configs if axis in c.task_params})
    for x in at:
        if x not in planned:
            raise ArchsepError.at("at", f"{axis}={x} is not planned; preset {preset} plans {axis} = "
                                        f"{', '.join(map(str, planned))}")
    return [c for c in configs if c.task_params.get(axis) in at]


def override_suffix(overrides: dict[str, Any] | None) -> str:
    return "".join(f"-{k.split('.')[-1]}={v}" for k, v in (overrides or {}).items())


def parse_set(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE strings (VALUE as TOML: 0.1, true, "text", [1, 2]; bare words are strings)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ArchsepError.at("set", f"expected KEY=VALUE (e.g. train.weight_decay=0.1), got '{item}'")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        except RecursionError:
            value = None
        if value is None or _too_deep(value, MAX_DEPTH - 2):
            raise ArchsepError.at("set", f"{key.strip()}: a value nested deeper than {MAX_DEPTH - 2} levels")
        out[key.strip()] = value
    return out
