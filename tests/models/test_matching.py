"""Matched comparisons (models/matching.py and a sweep's [match]): the chosen width is the one
whose count is closest to the target among every width the model accepts (checked by brute
force over the registry), the sweep's matched runs count within the tolerance of their
reference at every grid point (counted here by building the models), and bad tables are one-line
errors naming the field."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from archsep.config import RunConfig
from archsep.errors import ArchsepError
from archsep.models import MODELS
from archsep.models.matching import match_width, measure, width_field
from archsep.sweeps.file import load_file, parse

SPEC = RunConfig(task="index-lookup", arch="lstm", task_params={"N": 12}).build_task().spec
SMALL = {"layers": 1}  # keeps every model small enough to build many times


def _width_archs():
    return [name for name in MODELS.names() if name in _FIELDS]


def _field_or_none(name):
    try:
        return width_field(name)
    except ArchsepError as e:
        assert e.field == "field"
        return None


_FIELDS = {name: f for name in MODELS.names() if (f := _field_or_none(name))}


def test_every_model_has_a_width_or_says_which_field_to_name():
    """The registry loop: a model is matched by its integer width (or hidden), or names the field."""
    assert {"tf-preln", "lstm", "mamba", "retnet"} <= set(_FIELDS)
    for name in MODELS.names():
        if name not in _FIELDS:
            with pytest.raises(ArchsepError, match="name the parameter"):
                match_width(name, {}, SPEC, 1000)


def _params(arch):
    fields = {f.name for f in dataclasses.fields(MODELS.get(arch))}
    return {k: v for k, v in SMALL.items() if k in fields}


def _brute(arch, params, field, target, top=160):
    counts = {}
    for w in range(1, top + 1):
        try:
            counts[w] = measure(arch, {**params, field: w}, SPEC)
        except (ArchsepError, ValueError):
            pass
    return counts


@pytest.mark.parametrize("arch", _width_archs())
def test_the_chosen_width_is_the_closest_accepted_one(arch):
    """Oracle: every accepted width in 1..160 counted; the match is the closest to the target
    (ties to the smaller width), or an error when none is within the tolerance."""
    params = _params(arch)
    field = _FIELDS[arch]
    counts = _brute(arch, params, field, 0)
    assert counts, f"{arch} accepts no width up to 160"
    target = sorted(counts.values())[len(counts) // 2] + 37  # between two accepted widths' counts
    best = min(counts, key=lambda w: (abs(counts[w] - target), w))
    if abs(counts[best] - target) / target > 0.05:
        with pytest.raises(ArchsepError) as e:
            match_width(arch, params, SPEC, target)
        assert e.value.field == field and str(best) in str(e.value)
        return
    m = match_width(arch, params, SPEC, target)
    assert (m.value, m.count) == (best, counts[best])
    assert m.error <= 0.05


def test_counts_are_trainable_parameters_and_state_floats():
    m = MODELS.build("lstm", hidden=16, layers=1).build(SPEC)
    assert measure("lstm", {"hidden": 16, "layers": 1}, SPEC) == sum(p.numel() for p in m.parameters())
    assert measure("lstm", {"hidden": 16, "layers": 1}, SPEC, by="state") == m.state_size(SPEC.seq_len) == 32
    got = match_width("lstm", {"layers": 1}, SPEC, 32 * 3, by="state")
    assert (got.value, got.count) == (48, 96)


def test_bad_requests_name_their_field():
    with pytest.raises(ArchsepError) as e:
        measure("tf-preln", {"width": 16}, SPEC, by="state")
    assert e.value.field == "by"
    with pytest.raises(ArchsepError) as e:
        match_width("lstm", {"hidden": 8}, SPEC, 1000)
    assert e.value.field == "hidden"
    with pytest.raises(ArchsepError) as e:
        match_width("lstm", {}, SPEC, 0)
    assert e.value.field == "target"
    with pytest.raises(ArchsepError) as e:
        measure("lstm", {}, SPEC, by="flops")
    assert e.value.field == "by"


SWEEP = """
name = "m"
seeds = 2
[base]
task = "index-lookup"
model_params = {{ layers = 1 }}
train = {{ budget = 640, eval_size = 64 }}
[[arms]]
label = "TF"
arch = "tf-preln"
model_params = {{ width = 32, heads = 2 }}
[[arms]]
label = "LSTM"
arch = "lstm"
{lstm}
[[arms]]
label = "Mamba"
arch = "mamba"
[grid]
"task_params.N" = [8, 24]
[match]
{match}
"""


def _counts(cfg):
    return measure(cfg.arch, dict(cfg.model_params), cfg.build_task().spec)


def test_a_sweep_matches_every_arm_to_its_reference_at_each_grid_point():
    sw = parse(SWEEP.format(lstm="", match='to = "TF"'))
    assert len(sw.configs) == 12
    by_point = {}
    for c in sw.configs:
        by_point.setdefault(c.task_params["N"], {})[c.label] = c
    for N, arms in by_point.items():
        ref = _counts(arms["TF"])
        assert "width" not in arms["Mamba"].model_params or arms["Mamba"].model_params["width"] > 0
        for lab in ("LSTM", "Mamba"):
            assert abs(_counts(arms[lab]) - ref) / ref <= 0.05, (N, lab)
    widths = {(c.label, c.task_params["N"]): c.model_params.get("hidden", c.model_params.get("width"))
              for c in sw.configs}
    assert widths[("LSTM", 8)] != widths[("LSTM", 24)] or widths[("Mamba", 8)] != widths[("Mamba", 24)]
    assert {(m["label"], m["task_params.N"]) for m in sw.matches} == {(a, n) for a in ("LSTM", "Mamba")
                                                                      for n in (8, 24)}
    # the same file again: the same runs (matching is deterministic)
    assert [c.run_id for c in parse(SWEEP.format(lstm="", match='to = "TF"')).configs] == [c.run_id for c in sw.configs]


def test_a_count_target_an_arm_subset_and_a_named_field():
    sw = parse(SWEEP.format(lstm="", match='to = 20000\narms = ["LSTM"]\nfields = { LSTM = "hidden" }'))
    for c in sw.configs:
        if c.label == "LSTM":
            assert abs(_counts(c) - 20000) / 20000 <= 0.05
        else:  # not matched: the defaults (Mamba) and the arm's own width (TF)
            assert c.model_params.get("width") in (None, 32)


@pytest.mark.parametrize("lstm, match, field", [
    ('model_params = { hidden = 64 }', 'to = "TF"', "arms[1].model_params.hidden"),
    ("", 'to = "Transformer"', "match.to"),
    ("", 'to = 0', "match.to"),
    ("", 'to = "TF"\nby = "flops"', "match.by"),
    ("", 'to = "TF"\narms = ["TF"]', "match.arms"),
    ("", 'to = "TF"\nfields = { Mamba = 3 }', "match.fields"),
    ("", 'to = "TF"\nfields = { TF = "width" }', "match.fields.TF"),
    ("", 'to = "TF"\ntolerance = 1.5', "match.tolerance"),
    ("", 'to = "TF"\ntolerence = 0.1', "match.tolerence"),
    ("", 'to = "TF"\nby = "state"', "match.by"),  # the reference (attention) has no fixed state
    ("", 'to = 10', "width"),  # no model is that small: the closest width is named
])
def test_bad_match_tables_are_one_line_errors_naming_the_field(lstm, match, field):
    with pytest.raises(ArchsepError) as e:
        parse(SWEEP.format(lstm=lstm, match=match))
    msg = str(e.value)
    assert "\n" not in msg and field in msg, msg


def test_the_example_sweep_matches_within_five_percent():
    path = Path(__file__).resolve().parents[2] / "examples" / "sweeps" / "matched-lookup.toml"
    sw = load_file(path)
    refs = {c.task_params["N"]: _counts(c) for c in sw.configs if c.label == "TF"}
    labels = {c.label for c in sw.configs}
    assert {"TF", "LinTF", "RetNet", "Mamba2", "LSTM"} <= labels
    for c in sw.configs:
        assert abs(_counts(c) - refs[c.task_params["N"]]) / refs[c.task_params["N"]] <= 0.05, c.label


def test_a_width_matched_at_each_length_is_part_of_the_point_not_another_curve():
    """analysis.grid.curve_keys: a field that takes one value per (arm, x), such as a matched
    width, does not split the arm's curve; one that takes several at the same x still does."""
    from archsep.analysis.grid import curve_keys

    flats = [{"label": "TF", "arch": "tf-preln", "task_params.N": n, "model_params.width": 64, "seed": s}
             for n in (10, 20) for s in (0, 1)]
    flats += [{"label": "LSTM", "arch": "lstm", "task_params.N": n, "model_params.hidden": h, "seed": s}
              for n, h in ((10, 78), (20, 80)) for s in (0, 1)]
    _, fields, keys = curve_keys(flats, "task_params.N")
    assert "model_params.hidden" not in fields and {k.name for k in keys} == {"TF", "LSTM"}
    flats += [{"label": "LSTM", "arch": "lstm", "task_params.N": 10, "model_params.hidden": 32, "seed": 0}]
    _, fields, keys = curve_keys(flats, "task_params.N")
    assert "model_params.hidden" in fields and len({k.name for k in keys}) == 4
