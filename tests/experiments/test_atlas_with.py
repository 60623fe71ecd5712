"""`archsep reproduce atlas --with NAME`: a mixer of one's own (the example plugin minGRU) beside
the atlas's built-in mixers, matched to the Transformer's parameters like them; the built-in
arms' runs stay the same runs; the analysis finds the added arm from the runs' labels (so a
report of a store holding it makes its claims); and the refusals, one line each."""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator

import pytest

from archsep import MODELS, ArchsepError, plugins
from archsep.cli import main
from archsep.experiments import PRESETS
from archsep.experiments.plan import from_experiment, plan_sweep
from archsep.models.matching import measure
from archsep.results import RunResult

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugins" / "mingru.py"


@contextlib.contextmanager
def loaded() -> Iterator[None]:
    """The example plugin imported as `--import` imports it; afterwards MODELS is as it was (no
    'mingru'), and the module and its note for the workers are forgotten."""
    modules = dict(plugins._MODULES)
    with MODELS.temporary("mingru", None):
        name = plugins.load(str(PLUGIN))
        try:
            yield
        finally:
            sys.modules.pop(name, None)
            plugins._MODULES.clear()
            plugins._MODULES.update(modules)


@pytest.fixture
def mingru() -> Iterator[None]:
    with loaded():
        yield


@pytest.fixture(scope="module")
def atlas():
    return PRESETS.get("atlas")()


def test_with_adds_the_matched_arm_to_every_task_and_changes_no_run(atlas, mingru):
    base = atlas.plan("cpu")
    runs = atlas.with_archs(["mingru", "mingru"]).plan("cpu")  # a name repeated counts once
    s = atlas.scale("cpu")
    added = [r for r in runs if r.label.endswith("/mingru")]
    assert len(added) == s.seeds * sum(len(t.Ns) for t in s.tasks) == 45
    assert {r.arch for r in added} == {"mingru"} and all(r.model_params["layers"] == 2 for r in added)
    new = {r.run_id for r in added}
    assert [r.run_id for r in runs if r.run_id not in new] == [r.run_id for r in base]  # the same runs, same ids
    assert atlas.extra == ()  # with_archs makes another atlas
    tf = {(r.task, r.task_params["N"]): measure(r.arch, dict(r.model_params), r.build_task().spec)
          for r in base if r.label.endswith("/TF") and r.seed == 0}
    for r in added:
        if r.seed == 0:
            target = tf[(r.task, r.task_params["N"])]
            n = measure(r.arch, dict(r.model_params), r.build_task().spec)
            assert abs(n - target) / target <= 0.05, (r.task, r.task_params, r.model_params)
    # one training setting per task for every arm, the added one too
    by_task: dict = {}
    for r in runs:
        by_task.setdefault(r.task, set()).add((r.train.budget, r.train.lr, r.train.threshold, r.train.eval_every))
    assert all(len(v) == 1 for v in by_task.values())


def test_sweep_and_reproduce_plan_the_same_runs_with_the_arm(atlas, mingru, capsys):
    plain = plan_sweep(atlas, "quick")
    sw = from_experiment("atlas", "quick", extra=["mingru"])
    assert sw.name == "atlas-quick-with=mingru" and sw.preset == "atlas"
    assert {c.run_id for c in plain.configs} < {c.run_id for c in sw.configs}
    assert len(sw.configs) - len(plain.configs) == 3 * 3  # 3 seeds x 3 lengths, one task
    assert [c.run_id for c in plan_sweep(atlas, "quick", extra=["mingru"]).configs] == [c.run_id for c in sw.configs]
    assert "analysis" in sw.source and "--with mingru" in sw.source
    assert main(["sweep", "atlas", "--quick", "--with", "mingru", "--print-toml"]) == 0
    assert "lookup/mingru" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["reproduce", "atlas", "--quick", "--with", "nosuch", "--dry-run"],
     ["--with: unknown value 'nosuch'", "not a registered arch", "--import"]),
    (["reproduce", "lookup-fig2", "--with", "mingru", "--dry-run"], ["--with: applies to the atlas preset only"]),
    (["sweep", "dyck-fig2", "--with", "mingru", "--print-toml"], ["--with: applies to the atlas preset only"]),
    (["reproduce", "atlas", "--quick", "--with", "lstm", "--dry-run"], ["--with: 'lstm' is the atlas's own LSTM"]),
    (["reproduce", "atlas", "--quick", "--with", "Mamba2", "--dry-run"], ["--with: 'Mamba2' is the atlas's own"]),
    (["reproduce", "atlas", "--quick", "--with", "dss", "--dry-run"], ["is the atlas's own S4D"]),  # an alias
    (["reproduce", "atlas", "--quick", "--with", "a/b", "--dry-run"], ["--with: 'a/b'", "without '/'"]),
])
def test_with_is_refused_in_one_line(argv, words, mingru, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err


def test_with_names_an_unknown_arch_as_an_error(atlas):
    with pytest.raises(ArchsepError) as e:
        atlas.with_archs(["mingru"])  # the plugin not loaded
    assert e.value.field == "with" and "--import" in str(e.value)


def _runs(arms: dict[str, float], task: str = "lookup") -> list[RunResult]:
    out = []
    for N in (4, 6, 8):
        for seed in range(3):
            for lab, alpha in arms.items():
                cfg = {"task": "index-lookup", "task_params": {"N": N}, "model_params": {}, "label": f"{task}/{lab}",
                       "arch": lab.lower(), "seed": seed, "train": {"budget": 10 ** 6, "threshold": 0.1}}
                out.append(RunResult(run_id=f"{task}{lab}{N}{seed}", config=cfg, status="ok",
                                     samples=int(1000 * N ** alpha * (1 + 0.04 * seed)), resolution=64,
                                     best_metric=0.05, final_metric=0.05))
    return out


def test_the_analysis_finds_the_added_arm_from_the_runs(atlas, tmp_path):
    """Built-in arms first, in the scale's order, then the others in name order; each gets its
    claim and its row, the figure and the text show it."""
    s = atlas.analyze(_runs({"TF": 1.0, "Xmix": 1.0, "LSTM": 2.0, "minGRU": 2.0, "Mamba2": 1.0}), "quick")
    assert [r["arch"] for r in s.data["atlas"]] == ["LSTM", "Mamba2", "minGRU", "Xmix"]
    assert {r["arch"]: r["verdict"] for r in s.data["atlas"]} == \
        {"LSTM": "held", "Mamba2": "not held", "minGRU": "held", "Xmix": "not held"}
    claims = [c for c in s.claims if c.kind == "separation" and "minGRU" in c.text]
    assert len(claims) == 1 and claims[0].held is True
    assert "lookup     minGRU" in atlas.text(s)
    assert atlas.figures(s, tmp_path)


def test_a_report_of_a_store_holding_the_arm_makes_its_claims(atlas, mingru, tmp_path):
    """`archsep report` re-analyses a stored atlas sweep with a fresh preset (no --with): the
    added arm's claim comes from the stored runs."""
    from archsep.experiments.report import build
    from archsep.store import open_store, record

    sw = plan_sweep(atlas, "quick", extra=["mingru"])
    alpha = {"TF": 1.0, "LSTM": 2.0, "Mamba2": 1.0, "mingru": 2.0}
    with open_store(tmp_path) as store:
        store.register_sweep(sw.sweep_id, sw.name, sw.source, [(c.run_id, c.to_dict()) for c in sw.configs],
                             preset=sw.preset, quick=sw.quick, analysis=sw.analysis)
        for c in sw.configs:
            n = int(1000 * c.task_params["N"] ** alpha[c.label.split("/")[1]] * (1 + 0.04 * c.seed))
            store.add(record(RunResult(c.run_id, c.to_dict(), "ok", n, 64, 0.05, 0.05, wall_s=1.0)))
        _, data = build(store)
    texts = [c["text"] for c in data["claims"]]
    assert any("mingru" in t and "TF" in t for t in texts), texts
    rows = data["analyses"][0]["summary"]["atlas"]
    assert [r["arch"] for r in rows] == ["LSTM", "Mamba2", "mingru"]
