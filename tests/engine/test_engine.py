"""The engine's newer parts: per-slice learning rates in a stack (StackAdamW), lr grids trained
as one stacked computation, keep_best with a test set of its own seed, a fixed training set
replayed in epochs (train_set_size), probes, run identity across the new fields, and the
evaluation scheduler (`decide`)."""

import dataclasses
import math
from collections import Counter

import pytest
import torch

from archsep.config import HELD_OUT_ROLE, RunConfig, TrainConfig
from archsep.engine import evaluation
from archsep.engine.stack import StackAdamW
from archsep.engine.train import Stream, train_many, train_run
from archsep.errors import ArchsepError
from archsep.models.rnn import RNN


def dyck(lr=1e-2, seed=0, **train):
    """A small Dyck-(2,2) LSTM that learns in a few hundred steps (classification, fixed shapes)."""
    base = dict(lr=lr, weight_decay=0.0, budget=64 * 300, threshold=0.05, eval_every=20, eval_size=500,
                eval_mode="every", keep_best=True, test_size=500)
    return RunConfig("dyck", "lstm", {"N": 8}, {"hidden": 16}, TrainConfig(**{**base, **train}), seed=seed)


def dyck_tf(lr=1e-2, seed=0, **train):
    """The same task on a small Transformer: a stackable model (RNNs never stack, their fused
    kernels win over a vmapped loop)."""
    return dataclasses.replace(dyck(lr, seed, **train), arch="tf-preln",
                               model_params={"layers": 1, "width": 16, "heads": 2})


def qstr(**train):
    base = dict(budget=20_000, eval_size=500, threshold=0.7)
    return RunConfig("qstr", "tf-b", {"N": 2}, {}, TrainConfig(**{**base, **train}))


def spy_stacks(monkeypatch):
    import archsep.engine.train as tr

    stacks = []
    real = tr.Stacked

    def spy(models, lr, weight_decay):
        stacks.append(real(models, lr, weight_decay))
        stacks[-1].built_with = (len(models), list(lr) if not isinstance(lr, float) else lr)
        return stacks[-1]

    monkeypatch.setattr(tr, "Stacked", spy)
    return stacks


# --- 1. StackAdamW is torch's AdamW, slice by slice ------------------------------------------

def test_stack_adamw_is_exactly_adamw_per_slice_and_after_dropping_a_slice():
    g = torch.Generator().manual_seed(0)
    K, lrs, wd = 3, [1e-3, 3e-3, 1e-2], 0.1
    shapes = [(K, 4, 5), (K, 7), (K, 2, 3, 2)]
    stacked = [torch.randn(s, generator=g) for s in shapes]
    # reference: one torch AdamW per slice, on copies of that slice's tensors
    ref = [[p[k].clone().requires_grad_() for p in stacked] for k in range(K)]
    ref_opts = [torch.optim.AdamW(ref[k], lr=lrs[k], weight_decay=wd, foreach=False) for k in range(K)]
    params = [p.clone() for p in stacked]
    opt = StackAdamW(params, lrs, wd)

    def steps(n, opt, params, slices):
        for _ in range(n):
            grads = [torch.randn(p.shape, generator=g) for p in params]
            for p, gr in zip(params, grads):
                p.grad = gr
            opt.step()
            for j, k in enumerate(slices):
                for r, gr in zip(ref[k], grads):
                    r.grad = gr[j].clone()
                ref_opts[k].step()
            for j, k in enumerate(slices):
                for p, r in zip(params, ref[k]):
                    torch.testing.assert_close(p[j], r.detach(), rtol=1e-6, atol=1e-7)

    steps(5, opt, params, [0, 1, 2])
    for p, p0 in zip(params, stacked):  # the update really moved every slice, by different amounts
        moved = (p - p0).abs().flatten(1).amax(1)
        assert (moved > 0).all() and len(set(moved.tolist())) == K

    sel = torch.tensor([0, 2])
    kept = [p[sel].clone() for p in params]
    opt = opt.keep(sel, kept)
    steps(5, opt, kept, [0, 2])


# --- 2. an lr grid is one stacked computation ------------------------------------------------

def test_an_lr_grid_trains_as_one_stack_with_the_results_of_one_run_at_a_time(monkeypatch):
    stacks = spy_stacks(monkeypatch)
    lrs = [1e-3, 3e-3, 1e-2]
    plain = [train_run(dyck_tf(lr)) for lr in lrs]
    assert stacks == []  # the plain path does not stack
    fast = train_many([dyck_tf(lr) for lr in lrs])
    assert len(stacks) == 1 and stacks[0].built_with == (3, lrs)  # one stacked computation served all lrs
    assert isinstance(stacks[0].opt, StackAdamW)  # one lr per slice
    # the lrs really differ in outcome: different curves and different stopping points
    assert len({tuple(p.curve) for p in plain}) == 3 and len({p.samples for p in plain}) > 1
    for p, f in zip(plain, fast):
        assert p.status == f.status, (p.status, f.status)
        assert abs(p.samples - f.samples) <= p.resolution
        assert abs(p.best_metric - f.best_metric) <= 0.02
        assert p.test_metric is not None and f.test_metric is not None
        assert abs(p.test_metric - f.test_metric) <= 0.02
        assert f.params == p.params and f.config["train"]["lr"] == p.config["train"]["lr"]


def test_lr_and_seed_leave_the_group_key_except_that_variable_shapes_keep_the_seed():
    from archsep.engine.planning import group_key

    assert group_key(dyck(1e-3)) == group_key(dyck(1e-2, seed=3))
    assert group_key(dyck(1e-3)) != group_key(dyck(1e-3, weight_decay=0.1))

    def il(lr, seed, lengths):
        return RunConfig("index-lookup", "lstm", {"N": 4, "vocab": 4, "min_length": 2, "train_lengths": lengths},
                         {"hidden": 8}, TrainConfig(lr=lr), seed=seed)

    assert group_key(il(1e-3, 0, "variable")) == group_key(il(1e-2, 0, "variable"))
    assert group_key(il(1e-3, 0, "variable")) != group_key(il(1e-3, 1, "variable"))
    assert group_key(il(1e-3, 0, "fixed")) == group_key(il(1e-2, 1, "fixed"))


# --- 3. keep_best and the test set -----------------------------------------------------------

# Too-high learning rates: the held-out error reaches its minimum, then rises again by the end.
# Which rate does that depends on the CPU's float rounding (0.15 did on an Intel Xeon and
# converged on an AMD EPYC, 0.2 the reverse), so the tests take the first of these that does on
# the machine they run on, and fail if none does (the case must not be vacuous).
OVERSHOOTING = (0.2, 0.15, 0.3, 0.1, 0.25, 0.4)


def _rises(results, k: int = 0) -> bool:
    return results[k].final_metric > results[k].best_metric + 0.02


def test_keep_best_tests_the_best_checkpoint_not_the_last():
    c = dict(budget=64 * 200, threshold=0.01, test_size=1000, stop_at_threshold=False)
    for lr in OVERSHOOTING:
        best = train_run(dyck(lr, **c, keep_best=True))
        if _rises([best]):
            break
    c["lr"] = lr
    last = train_run(dyck(**c, keep_best=False))
    assert best.curve == last.curve  # keep_best changes what is tested, not the training
    assert best.final_metric > best.best_metric + 0.02  # the case is not vacuous
    assert best.best_metric == min(m for _, m in best.curve)
    assert best.best_samples == min(best.curve, key=lambda p: p[1])[0] < best.curve[-1][0]
    # the test metric is the best checkpoint's: exactly that of the same run stopped there
    there = train_run(dyck(**{**c, "budget": best.best_samples}, keep_best=False))
    assert there.final_metric == best.best_metric
    assert best.test_metric == there.test_metric
    assert abs(best.test_metric - last.test_metric) > 0.02  # and not the last parameters'


def test_keep_best_in_a_stack_tests_each_runs_own_best_checkpoint(monkeypatch):
    import archsep.engine.train as tr

    monkeypatch.setattr(tr, "worth_stacking", lambda cfg: True)  # the LSTM's numbers, in a stack all the same
    # stacked with a second lr; at a high lr small numerical differences (vmapped plain ops vs
    # fused kernels) grow, so the stack is checked against itself stopped at the best point
    c = dict(budget=64 * 200, threshold=0.01, test_size=1000, stop_at_threshold=False)
    for high in OVERSHOOTING:  # the first that rises again in this stack on this CPU (see above)
        lrs = (high, 3e-3)
        best = train_many([dyck(lr, **c) for lr in lrs])
        if _rises(best):
            break
    last = train_many([dyck(lr, **c, keep_best=False) for lr in lrs])
    hi = best[0]
    assert hi.final_metric > hi.best_metric + 0.02
    for b in best:
        assert b.best_samples == min(b.curve, key=lambda q: q[1])[0]
    assert abs(hi.test_metric - last[0].test_metric) > 0.02
    # each run's test metric is its own best checkpoint's: that of the same stack stopped there
    for k, b in enumerate(best):
        there = train_many([dyck(lr, **{**c, "budget": b.best_samples}, keep_best=False) for lr in lrs])
        assert there[k].final_metric == b.best_metric and there[k].test_metric == b.test_metric


def test_the_test_set_has_a_seed_of_its_own_and_moves_the_held_out_set_to_validation():
    with_test = dyck(test_size=500)
    without = dyck(test_size=0)
    task = with_test.build_task()
    test = evaluation.test_set(with_test, task)
    val = evaluation.held_out_set(with_test, task)
    held = evaluation.held_out_set(without, task)
    assert len(test) == 500 and len(val) == len(held) == 500
    assert not torch.equal(test.x, val.x) and not torch.equal(test.x, held.x)
    assert not torch.equal(val.x, held.x)
    # without a test set the held-out set is the one runs drew before the new fields existed
    old = task.sample_test(500, torch.Generator().manual_seed(without.derived_seed(HELD_OUT_ROLE)))
    assert torch.equal(held.x, old.x) and torch.equal(held.y, old.y)
    # and each set depends on the run's seed
    other = dyck(test_size=500, seed=1)
    assert not torch.equal(evaluation.test_set(other, other.build_task()).x, test.x)


# --- 4. a fixed training set, replayed in epochs ---------------------------------------------

def test_a_fixed_training_set_is_replayed_once_per_epoch_in_a_new_order():
    bs = 64
    c = qstr(train_set_size=4 * bs, batch_size=bs)
    stream = Stream(c, c.build_task(), torch.device("cpu"))
    pool = stream.pool
    assert len(pool) == 4 * bs
    where = {row.numpy().tobytes(): i for i, row in enumerate(pool.x)}
    assert len(where) == len(pool)  # float features: every example is distinct

    def epoch():
        idx = []
        for _ in range(4):
            b = stream.next()
            assert len(b) == bs
            rows = [where[r.numpy().tobytes()] for r in b.x]
            assert torch.equal(b.y, pool.y[rows])  # labels travel with their inputs
            idx += rows
        return idx

    first, second = epoch(), epoch()
    assert sorted(first) == list(range(4 * bs)) and sorted(second) == list(range(4 * bs))
    assert first != second and first != list(range(4 * bs))


def test_a_run_on_a_fixed_training_set_draws_no_fresh_batches_and_learns(monkeypatch):
    from archsep.tasks.dyck import Dyck

    calls = Counter()
    real = Dyck.sample

    def spy(self, n, generator):
        calls[n] += 1
        return real(self, n, generator)

    monkeypatch.setattr(Dyck, "sample", spy)
    c = dyck(3e-3, train_set_size=1024, test_size=0, keep_best=False, threshold=0.1, budget=64 * 200,
             eval_size=1000)
    r = train_run(c)
    # one draw of the training set, one of the held-out set: no fresh training batch ever
    assert calls == Counter({1024: 1, 1000: 1})
    assert r.status == "ok" and r.best_metric < 0.1 < 0.5 == c.build_task().baseline
    online = train_run(dyck(3e-3, test_size=0, keep_best=False, threshold=0.1, budget=64 * 200, eval_size=1000))
    assert online.curve != r.curve


def test_a_fixed_training_set_needs_fixed_shapes():
    def il(lengths):
        return RunConfig("index-lookup", "lstm", {"N": 4, "vocab": 4, "min_length": 2, "train_lengths": lengths},
                         {"hidden": 8}, TrainConfig(train_set_size=256))

    with pytest.raises(ArchsepError, match=r"train\.train_set_size"):
        il("variable")
    il("fixed")
    with pytest.raises(ArchsepError, match="train_set_size"):
        TrainConfig(train_set_size=10, batch_size=64)


# --- probes ------------------------------------------------------------------------------------

def test_probes_are_recorded_at_each_full_evaluation_for_each_stacked_run(monkeypatch):
    def probe(self):
        return {"norm": float(sum(p.detach().double().pow(2).sum() for p in self.parameters()))}

    monkeypatch.setattr(RNN, "probe", probe, raising=False)
    c = dict(budget=64 * 60, threshold=0.01, test_size=0, keep_best=False, probe=True)
    plain = [train_run(dyck(lr, **c)) for lr in (1e-3, 1e-2)]
    fast = train_many([dyck(lr, **c) for lr in (1e-3, 1e-2)])
    for p, f in zip(plain, fast):
        assert [q["samples"] for q in f.extra["probes"]] == [s for s, _ in f.curve]
        for a, b in zip(p.extra["probes"], f.extra["probes"]):
            assert math.isclose(a["norm"], b["norm"], rel_tol=1e-4)
    assert fast[0].extra["probes"][-1]["norm"] != fast[1].extra["probes"][-1]["norm"]
    assert train_run(dyck(1e-3, **{**c, "probe": False})).extra == {}


# --- 5. run identity ---------------------------------------------------------------------------

# run ids computed at commit 60e4352, before keep_best/test_size/train_set_size/probe existed
OLD_IDS = [
    (lambda: RunConfig("qstr", "tf-b", {"N": 2}, {}, TrainConfig(budget=20000, eval_size=500, threshold=0.7)),
     "034202173b5ff8bb"),
    (lambda: RunConfig("dyck", "lstm", {"N": 8}, {"hidden": 16}, TrainConfig()), "e572266f88dbc328"),
    (lambda: RunConfig("index-lookup", "lstm", {"N": 4}, {"hidden": 8}, TrainConfig(lr=3e-3), seed=2),
     "a639a088fd7c583a"),
]


@pytest.mark.parametrize("make, old_id", OLD_IDS)
def test_runs_stored_before_the_new_fields_keep_their_ids(make, old_id):
    c = make()
    assert c.run_id == old_id
    assert not {"keep_best", "test_size", "train_set_size", "probe"} & set(c.canonical()["train"])


@pytest.mark.parametrize("make, old_id", OLD_IDS)
def test_renamed_models_keep_their_run_ids(make, old_id):
    """'tf' became 'tf-b', 'rnn' 'rnn-b', 'dss' 's4d': either spelling is the same run."""
    from archsep.models import MODELS

    c = make()
    renamed = dataclasses.replace(c, arch=MODELS.aliases().get(c.arch, c.arch))
    assert renamed.run_id == c.run_id == old_id
    assert MODELS.get(renamed.arch) is MODELS.get(c.arch)


@pytest.mark.parametrize("old, new", [("tf", "tf-b"), ("rnn", "rnn-b"), ("dss", "s4d")])
def test_every_renamed_model_resolves_and_keeps_ids(old, new):
    from archsep.models import MODELS

    assert MODELS.aliases()[old] == new and new in MODELS.names() and old not in MODELS.names()
    task = ("qstr", {"N": 3}) if old != "dss" else ("index-lookup", {"N": 4})
    a, b = (RunConfig(task[0], name, task[1], {}, TrainConfig(budget=640)) for name in (old, new))
    assert a.run_id == b.run_id and a.canonical()["arch"] == old
    other = RunConfig(task[0], "ffn", task[1], {}, TrainConfig(budget=640))
    assert other.run_id != a.run_id  # the identity still names the model


@pytest.mark.parametrize("field, value", [("keep_best", True), ("test_size", 100), ("train_set_size", 128),
                                          ("probe", True)])
def test_a_new_field_away_from_its_default_is_part_of_the_identity(field, value):
    base = qstr()
    c = qstr(**{field: value})
    assert c.canonical()["train"][field] == value
    assert c.run_id != base.run_id


# --- 6. the evaluation scheduler -------------------------------------------------------------

FAR = dict(progressive=0.9, window_se=0.01, held_out_se=0.01, drop=0.0, z=3.0, threshold=0.1)
NEAR = dict(progressive=0.12, window_se=0.01, held_out_se=0.01, drop=0.0, z=3.0, threshold=0.1)


@pytest.mark.parametrize("mode, curve_point, has_ref, stats, want", [
    ("every", False, False, FAR, "full"),
    ("every", False, True, NEAR, "full"),
    ("progressive", True, True, FAR, "full"),
    ("progressive", False, True, FAR, "skip"),
    ("progressive", False, False, FAR, "skip"),
    ("progressive", False, False, NEAR, "full"),
    ("progressive", False, True, NEAR, "screen"),
    # below the threshold already: never skipped
    ("progressive", False, True, {**NEAR, "progressive": 0.05}, "screen"),
    # far above, but a large recent drop brings the threshold within reach
    ("progressive", False, True, {**FAR, "drop": 0.79}, "screen"),
    # far above in mean, but too noisy to rule the threshold out (z * se > gap)
    ("progressive", False, True, {**FAR, "window_se": 0.3, "held_out_se": 0.3}, "screen"),
    # before any held-out evaluation its se is unknown (inf): the window's stands in for it
    ("progressive", False, False, {**FAR, "held_out_se": math.inf}, "skip"),
    ("progressive", False, False, {**FAR, "window_se": 0.2, "held_out_se": math.inf}, "full"),
])
def test_decide(mode, curve_point, has_ref, stats, want):
    assert evaluation.decide(mode=mode, curve_point=curve_point, has_reference=has_ref, **stats) == want


def test_eval_early_adds_the_1_2_5_steps_below_eval_every_and_changes_no_other_run_id():
    tc = TrainConfig(eval_every=100, eval_mode="every", eval_early=True, budget=64 * 200, stop_at_threshold=False,
                     eval_size=200)
    assert tc.early_steps() == (1, 2, 5, 10, 20, 50)
    assert TrainConfig(eval_every=1000, eval_mode="every", eval_early=True).early_steps()[-3:] == (100, 200, 500)
    assert TrainConfig(eval_every=100, eval_mode="every").early_steps() == ()
    r = train_run(RunConfig("qstr", "tf-b", {"N": 2}, {}, tc))
    assert [s // 64 for s, _ in r.curve] == [1, 2, 5, 10, 20, 50, 100, 200]
    assert r.eval_schedule["early_steps"] == [1, 2, 5, 10, 20, 50]
    # off by default, and then not part of the identity: stored runs keep their ids
    plain = qstr()
    assert plain.run_id == dataclasses.replace(plain, train=dataclasses.replace(plain.train, eval_early=False)).run_id
    assert "eval_early" not in plain.canonical()["train"]
    with pytest.raises(ArchsepError) as e:
        TrainConfig(eval_early=True)  # progressive mode skips looks: early ones would be skipped too
    assert e.value.field == "eval_early"
