"""Length generalisation (`train.eval_lengths`): held-out sets drawn at exactly one length
(`Task.at_length`), the trained checkpoint's metric at each length in `extra["by_length"]`,
checked against a computation written out here; run ids, the store, sweep files, errors; and
the accuracy-against-length analysis, figure and report."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn

from archsep.config import RunConfig, TrainConfig, derive_seed
from archsep.engine.train import train_many, train_run
from archsep.errors import ArchsepError
from archsep.models import MODELS, make_model_config
from archsep.models.base import ModelConfig, SeqModel
from archsep.results import RunResult
from archsep.store import open_store, record
from archsep.sweeps.file import parse
from archsep.sweeps.toml import to_toml
from archsep.tasks import make_task
from archsep.tasks.base import TaskSpec
from archsep.tasks.dyck import dyck_accepts
from chomsky_oracles import check_against_oracle


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- a hand-built model: the parity of the first k bits -------------------------------------
class FirstBits(SeqModel):
    """Predicts the parity of the first k bits at every position: right on every string of at
    most k bits, a coin flip on longer ones. Its one parameter shifts both logits alike (the
    optimiser has something to step, the predictions never change). With `limit`, it refuses
    inputs longer than that, a bound its config does not declare."""

    def __init__(self, k: int, limit: int):
        super().__init__()
        self.k, self.limit = k, limit
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.limit and x.shape[1] > self.limit:
            raise RuntimeError(f"at most {self.limit} positions")
        logits = nn.functional.one_hot(x[:, :self.k].sum(1) % 2, 2).float() * 5 + self.w
        return logits[:, None].expand(-1, x.shape[1], -1)


@dataclass(frozen=True)
class FirstBitsConfig(ModelConfig):
    k: int = 10
    limit: int = 0

    def build(self, spec: TaskSpec) -> FirstBits:
        return FirstBits(self.k, self.limit)


@pytest.fixture(autouse=True)
def first_bits_model():
    """Registered for this module's tests alone: a model left in MODELS would join every later
    test that loops over the registry (test_models_paper_a's pruning check, for one)."""
    with MODELS.temporary("test-first-bits", FirstBitsConfig):
        yield


def first_bits_run(lengths=(5, 10, 20, 40), seed=3, **train) -> RunConfig:
    tc = dict(batch_size=16, budget=32, eval_every=1, eval_size=300, eval_mode="every", threshold=1e-9,
              eval_lengths=lengths)
    return RunConfig("parity", "test-first-bits", {"N": 10}, {"k": 10}, TrainConfig(**{**tc, **train}), seed)


def test_the_metric_at_each_length_is_the_checkpoints_error_on_its_own_set_computed_independently():
    r = train_run(first_bits_run())
    assert r.status != "error", r.error
    assert set(r.extra["by_length"]) == {"5", "10", "20", "40"}
    for n in (5, 10, 20, 40):
        # the set: eval_size uniform bit strings of exactly n bits from the seed of role length-test:n
        g = torch.Generator().manual_seed(derive_seed(3, f"length-test:{n}"))
        bits = torch.randint(0, 2, (300, n), generator=g).tolist()
        right = sum((sum(b[:10]) % 2) == (sum(b) % 2) for b in bits)
        assert r.extra["by_length"][str(n)] == pytest.approx(1 - right / 300, abs=1e-6), n
    assert r.extra["by_length"]["5"] == r.extra["by_length"]["10"] == 0  # at most k bits: always right
    assert 0.4 < r.extra["by_length"]["40"] < 0.6  # beyond: a coin flip


def test_a_model_that_cannot_read_a_length_fails_before_training_naming_the_field():
    r = train_run(dataclasses.replace(first_bits_run(lengths=(10, 20)), model_params={"k": 10, "limit": 15}))
    assert r.status == "error" and not r.curve
    assert r.error.splitlines()[0].endswith("ArchsepError: train.eval_lengths: model 'test-first-bits' cannot "
                                            "read length 20: at most 15 positions")


# --- sets drawn at exactly length n, with the task's labels ------------------------------------
FORMAL = ["parity", "even-pairs", "modular-arithmetic", "reverse-string", "duplicate-string", "stack-manipulation"]
POSITIONS = {"parity": lambda n: n, "even-pairs": lambda n: n, "modular-arithmetic": lambda n: n,
             "reverse-string": lambda n: 2 * n + 1, "duplicate-string": lambda n: 3 * n + 1,
             "stack-manipulation": lambda n: 2 * n + 2}


@pytest.mark.parametrize("name", FORMAL)
def test_a_formal_task_at_length_n_draws_n_symbols_with_the_oracles_labels(name):
    task = make_task(name, N=9)
    for n in (3, 9, 25):  # shorter than, at and beyond the training length
        at = task.at_length(n)
        b = at.sample_test(200, gen(n))
        assert b.x.shape[1] == at.spec.seq_len == POSITIONS[name](n)
        check_against_oracle(name, b, n)  # every example, by the oracle of tests/tasks/test_tasks_chomsky.py
        assert at.spec.input_dim == task.spec.input_dim and at.seed == task.seed


def test_index_lookup_and_dyck_at_length_n():
    il = make_task("index-lookup", N=20, vocab=16).at_length(7)
    b = il.sample_test(300, gen())
    assert b.x.shape[1] == il.spec.seq_len == 7 + 1  # n symbols and the query
    s, p = b.x[:, :7], b.x[:, 7] - 16
    assert ((0 <= p) & (p < 7)).all() and torch.equal(b.y, s.gather(1, p[:, None]).squeeze(1))
    dyck = make_task("dyck", N=20).at_length(40)
    b = dyck.sample_test(300, gen())
    assert b.x.shape == (300, 40) and torch.equal(b.y.bool(), dyck_accepts(b.x)) and 0.3 < b.y.float().mean() < 0.7


@pytest.mark.parametrize("name, params, n", [("in-context-recall", {"N": 32}, 64), ("noisy-recall", {"N": 32}, 64),
                                             ("mqar", {"N": 32, "vocab": 32}, 64), ("selective-copying", {}, 64),
                                             ("fuzzy-recall", {"N": 32}, 64), ("memorization", {"N": 16}, 32)])
def test_token_recall_tasks_at_length_n_are_the_task_with_N_equal_n(name, params, n):
    task = make_task(name, **params)
    at = task.at_length(n)
    b = at.sample_test(50, gen())
    assert b.x.shape == (50, n) == (50, at.spec.seq_len)
    want = make_task(name, **{**params, "N": n}).sample_test(50, gen())
    assert torch.equal(b.x, want.x) and torch.equal(b.y, want.y)
    assert at.spec.input_dim == task.spec.input_dim  # the same vocabulary: the trained model embeds it


# --- the config: identity, checks -------------------------------------------------------------
def _parity(arch="lstm", params=None, **train) -> RunConfig:
    params = {"hidden": 8} if params is None else params
    return RunConfig("parity", arch, {"N": 20}, params, TrainConfig(**train), 0)


def test_run_ids_are_unchanged_without_eval_lengths_and_differ_with_them():
    base = _parity()
    assert "eval_lengths" not in base.canonical()["train"]
    assert _parity(eval_lengths=()).run_id == _parity(eval_lengths=[]).run_id == base.run_id
    a, b = _parity(eval_lengths=[20, 40]), _parity(eval_lengths=(20, 40))
    assert a.train.eval_lengths == (20, 40) and a.run_id == b.run_id != base.run_id
    assert a.canonical()["train"]["eval_lengths"] == (20, 40)
    assert _parity(eval_lengths=(20, 80)).run_id != a.run_id


@pytest.mark.parametrize("make, says", [
    (lambda: TrainConfig(eval_lengths=(0, 10)), "eval_lengths: must be increasing integer lengths >= 1, got [0, 10]"),
    (lambda: TrainConfig(eval_lengths=(20, 10)), "eval_lengths: must be increasing"),
    (lambda: TrainConfig(eval_lengths=(10, 10)), "eval_lengths: must be increasing"),
    (lambda: _parity("tf-preln", {"width": 8, "heads": 2}, eval_lengths=(20, 40)),
     "train.eval_lengths: length 40 gives 40 positions, but model 'tf-preln' built for the task's N = 20 reads at "
     "most 20 (its learned positions end there"),
    (lambda: _parity("ffn", {}, eval_lengths=(40,)), "train.eval_lengths: length 40 gives 40 positions"),
    (lambda: RunConfig("dyck", "lstm", {"N": 20}, {"hidden": 8}, TrainConfig(eval_lengths=(41,))),
     "train.eval_lengths: task 'dyck' cannot be drawn at length 41: N: must be an even integer >= 2, got 41"),
    (lambda: RunConfig("index-lookup", "lstm", {"N": 20}, {"hidden": 8}, TrainConfig(eval_lengths=(40,))),
     "train.eval_lengths: task 'index-lookup' at length 40 uses 104 token ids, but the model is built for its N "
     "with 84"),
    (lambda: RunConfig("qstr", "tf-b", {"N": 4}, {}, TrainConfig(eval_lengths=(8,))),
     "train.eval_lengths: task 'qstr' cannot be drawn at length 8"),
])
def test_a_bad_value_is_one_line_naming_the_field(make, says):
    with pytest.raises(ArchsepError) as e:
        make()
    assert str(e.value).startswith(says) and "\n" not in str(e.value)
    assert e.value.field in ("eval_lengths", "train.eval_lengths")


def test_lengths_without_learned_positions_are_accepted_and_shorter_ones_always():
    for params in ({"positions": p, "width": 8, "heads": 2} for p in ("rope", "alibi", "none", "sinusoidal")):
        _parity("tf-preln", params, eval_lengths=(10, 20, 80))
    _parity("tf-preln", {"width": 8, "heads": 2}, eval_lengths=(5, 20))  # learned: up to its N
    _parity("ffn", {}, eval_lengths=(5, 20))
    RunConfig("index-lookup", "lstm", {"N": 20}, {"hidden": 8}, TrainConfig(eval_lengths=(5, 20)))


@pytest.mark.parametrize("arch", ["tf-preln", "gla"])
def test_sinusoidal_positions_beyond_the_built_length_are_the_codes_of_a_longer_model(arch):
    short, long = (TaskSpec("tokens", 5, L, 3, "last") for L in (8, 30))
    cfg = make_model_config(arch, layers=1, width=8, heads=2, positions="sinusoidal")
    torch.manual_seed(0)
    a = cfg.build(short)
    b = cfg.build(long)
    b.load_state_dict(a.state_dict())  # the codes are a buffer outside the state: the same parameters
    x = torch.randint(0, 5, (3, 30), generator=gen())
    torch.testing.assert_close(a(x), b(x), rtol=0, atol=1e-6)
    learned = make_model_config(arch, layers=1, width=8, heads=2, positions="learned").build(short)
    with pytest.raises(ArchsepError, match="seq_len"):
        learned(x)


# --- the engine: a real training run -------------------------------------------------------------
def _tiny(seed=0, lengths="variable", **train) -> RunConfig:
    tc = dict(lr=3e-3, batch_size=16, budget=16 * 20, eval_every=10, eval_size=100, eval_mode="every",
              threshold=1e-6)
    return RunConfig("parity", "tf-preln", {"N": 8, "train_lengths": lengths},
                     {"layers": 1, "width": 8, "heads": 2, "positions": "rope"}, TrainConfig(**{**tc, **train}), seed)


def test_a_training_run_stores_one_metric_per_length_and_trains_as_without_them(tmp_path, monkeypatch):
    import archsep.engine.train as tr

    stacks = []
    real = tr.Stacked
    monkeypatch.setattr(tr, "Stacked", lambda models, *a: stacks.append(len(models)) or real(models, *a))
    plain = train_run(_tiny(lengths="fixed"))
    runs = train_many([_tiny(s, "fixed", eval_lengths=(4, 8, 16, 32)) for s in (0, 1)])
    assert stacks == [2]  # the two seeds trained as one stacked computation
    alone = [train_run(_tiny(s, "fixed", eval_lengths=(4, 8, 16, 32))) for s in (0, 1)]
    for r, a in zip(runs, alone):
        assert r.status != "error", r.error
        assert list(r.extra["by_length"]) == ["4", "8", "16", "32"]
        assert all(0 <= v <= 1 for v in r.extra["by_length"].values())
        assert r.extra["by_length"] == pytest.approx(a.extra["by_length"], abs=0.02)  # stacked = alone
    assert alone[0].curve == plain.curve and "by_length" not in plain.extra  # the training is the same
    with open_store(tmp_path) as st:  # the store keeps it
        st.add(record(runs[0]))
        back = {r.run_id: r for r in st.results()}[runs[0].run_id]
    assert back.extra["by_length"] == runs[0].extra["by_length"]
    assert RunConfig.from_dict(back.config).train.eval_lengths == (4, 8, 16, 32)
    assert RunConfig.from_dict(back.config).run_id == runs[0].run_id


def test_with_keep_best_the_lengths_test_the_checkpoint_the_test_metric_tests():
    # the best checkpoint's metric at each length: that of the same run stopped at its best point
    c = dict(lr=0.05, budget=16 * 40, test_size=100, stop_at_threshold=False, eval_lengths=(4, 16))
    best = train_run(_tiny(**c, keep_best=True))
    last = train_run(_tiny(**c, keep_best=False))
    assert best.best_samples < best.curve[-1][0]  # the case is not vacuous: the best point is not the last
    there = train_run(_tiny(**{**c, "budget": best.best_samples}, keep_best=False))
    assert there.test_metric == best.test_metric and there.extra["by_length"] == best.extra["by_length"]
    assert last.extra["by_length"] != best.extra["by_length"]  # not the last parameters


# --- sweep files ---------------------------------------------------------------------------------
SWEEP = """
name = "lengen"
seeds = 2
[base]
task = "parity"
task_params = { N = 20 }
train = { budget = 640, eval_lengths = [20, 40, 80] }
[[arms]]
arch = "lstm"
model_params = { hidden = 8 }
[[arms]]
arch = "tf-preln"
model_params = { width = 8, heads = 2, positions = "rope" }
"""


def test_eval_lengths_in_a_sweep_file_round_trip():
    sw = parse(SWEEP)
    assert len(sw.configs) == 4 and all(c.train.eval_lengths == (20, 40, 80) for c in sw.configs)
    text = to_toml(sw.configs, "again")
    assert "eval_lengths = [20, 40, 80]" in text
    assert sorted(c.run_id for c in parse(text).configs) == sorted(c.run_id for c in sw.configs)
    with pytest.raises(ArchsepError) as e:
        parse(SWEEP.replace('positions = "rope"', 'positions = "learned"'))
    assert "train.eval_lengths: length 40 gives 40 positions" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ArchsepError, match="eval_lengths") as e:
        parse(SWEEP.replace("[20, 40, 80]", "[20, 0]"))
    assert "\n" not in str(e.value)


# --- analysis, figure, report ---------------------------------------------------------------------
def _result(label, seed, errors: dict, N=20) -> RunResult:
    cfg = RunConfig("parity", "lstm", {"N": N}, {"hidden": 8}, TrainConfig(eval_lengths=tuple(map(int, errors))),
                    seed, label)
    return RunResult(cfg.run_id, cfg.to_dict(), "censored", 640, 64, 0.4, 0.3, [(640, 0.4)],
                     extra={"by_length": {k: v for k, v in errors.items()}})


def test_length_points_are_accuracy_means_over_seeds_with_a_t_interval_and_the_figure_is_drawn(tmp_path):
    from archsep.analysis.lengths import length_points
    from archsep.reporting.plots import accuracy_vs_length

    runs = [_result("A", 0, {"20": 0.0, "40": 0.2}), _result("A", 1, {"20": 0.1, "40": 0.4}),
            _result("B", 0, {"20": 0.5, "40": 0.5})]
    out = length_points(runs + [RunResult("x", runs[0].config, "error", None, 64, None, None)])
    assert out["measure"] == "accuracy" and out["train_N"] == {"A": 20, "B": 20}
    pts = {(p["curve"], p["length"]): p for p in out["points"]}
    assert set(pts) == {("A", 20), ("A", 40), ("B", 20), ("B", 40)}
    a40 = pts[("A", 40)]
    half = 12.706204736174707 * math.sqrt(0.02) / math.sqrt(2)  # t(0.975, 1) * sd / sqrt(2)
    assert a40["mean"] == pytest.approx(0.7) and a40["runs"] == 2
    assert a40["ci"] == pytest.approx([max(0.0, 0.7 - half), min(1.0, 0.7 + half)])
    assert pts[("B", 20)]["ci"] == [None, None]  # one seed: no interval
    paths = accuracy_vs_length(out, "test", tmp_path / "acc")
    assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.stat().st_size > 0 for p in paths)


def test_the_report_draws_accuracy_against_length_and_export_has_a_column_per_length(tmp_path):
    from archsep.experiments.report import build
    from archsep.reporting.tables import export_rows

    with open_store(tmp_path) as st:
        for r in (_result("A", 0, {"20": 0.0, "40": 0.2}), _result("A", 1, {"20": 0.1, "40": 0.4})):
            st.add(record(r))
        html, data = build(st)
        rows = export_rows(st)
    assert "accuracy-vs-length" in html
    assert [p["length"] for p in data["analyses"][0]["lengths"]["points"]] == [20, 40]
    assert sorted((r["by_length.20"], r["by_length.40"]) for r in rows) == [(0.0, 0.2), (0.1, 0.4)]


def test_no_length_figure_without_eval_lengths(tmp_path):
    from archsep.experiments.report import build

    cfg = RunConfig("parity", "lstm", {"N": 20}, {"hidden": 8}, TrainConfig(), 0)
    with open_store(tmp_path) as st:
        st.add(record(RunResult(cfg.run_id, cfg.to_dict(), "censored", 640, 64, 0.4, 0.3, [(640, 0.4)])))
        html, data = build(st)
    assert "accuracy-vs-length" not in html and "lengths" not in data["analyses"][0]


def test_the_example_sweep_file_plans_its_runs():
    path = Path(__file__).resolve().parents[2] / "examples" / "sweeps" / "length-generalisation-tiny.toml"
    sw = parse(path.read_text(), origin=str(path))
    assert {c.label for c in sw.configs} == {"TF-rope", "LSTM"} and len(sw.configs) == 4
    assert all(c.train.eval_lengths == (20, 40, 80) and c.task_params["N"] == 20 for c in sw.configs)
