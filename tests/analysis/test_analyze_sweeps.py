"""A store holding several sweeps (issue 55: the same sweep run again with a larger budget):
`archsep.analyze(DIR)` analyses it sweep by sweep, as `archsep report` does, says what differs
between them, and `sweep=` picks one; a name it does not hold is one line naming the field."""
from __future__ import annotations

import json

import pytest

import archsep
from archsep.errors import ArchsepError
from archsep.experiments.report import build
from archsep.runs.runner import run_configs
from archsep.store import open_store
from archsep.sweeps import file as sw
from sweep_util import tiny_toml


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def test_two_sweeps_in_one_store_are_analysed_apart_as_the_report_does(tmp_path):
    small, big = sw.parse(tiny_toml("rerun", budget=640)), sw.parse(tiny_toml("rerun", budget=1280))
    for s in (small, big):
        run_configs(s.configs, tmp_path, workers=1, progress=False, sweep=s)
    out = archsep.analyze(tmp_path)
    assert [p["sweep_id"] for p in out["sweeps"]] == [small.sweep_id, big.sweep_id]
    assert out["differs"] == {"train.budget": {small.sweep_id: [640], big.sweep_id: [1280]}}
    for part, s in zip(out["sweeps"], (small, big)):
        alone = archsep.analyze(tmp_path, sweep=s.sweep_id)
        assert _same({k: v for k, v in part.items() if k not in ("sweep", "sweep_id")}, alone)
        assert [x["text"] for x in alone["separations"]]  # the declared separation is stated, not lost
        by_name = archsep.analyze(tmp_path, sweep="rerun") if s is small else None  # a name: the first it names
        if by_name is not None:
            assert _same(by_name, alone)
    with open_store(tmp_path) as st:
        _, data = build(st)
    reported = [a for a in data["analyses"]]
    assert len(reported) == 2
    for a, part in zip(reported, out["sweeps"]):
        assert _same(a["separations"], part["separations"]) and _same(a["fits"], part["fits"])
    with pytest.raises(ArchsepError) as e:
        archsep.analyze(tmp_path, sweep="nope")
    assert e.value.field == "sweep" and "rerun" in str(e.value) and "\n" not in str(e.value)


def test_a_store_of_one_sweep_reads_as_before(tmp_path):
    s = sw.parse(tiny_toml("once", budget=640))
    run_configs(s.configs, tmp_path, workers=1, progress=False, sweep=s)
    assert "sweeps" not in archsep.analyze(tmp_path)
    assert _same(archsep.analyze(tmp_path), archsep.analyze(tmp_path, sweep="once"))
