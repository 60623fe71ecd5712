"""The cost model behind --dry-run: what it counts, and that a dry run runs and creates nothing."""
from __future__ import annotations

import pytest

import subprocess
import sys

from archsep.runs import cost, timing
from archsep.engine.planning import step_flops
from archsep.experiments import EXPERIMENTS


def test_estimate_counts_every_run_and_skips_finished_ones():
    configs = EXPERIMENTS.get("lookup-fig2")().plan("quick")
    est = cost.estimate(configs, workers=2)
    assert sum(a.runs for a in est["archs"]) == len(configs) == est["to_run"]
    # index lookup trains on lengths U{10..N}: FLOPs counted at the longest, scaled to the mean length
    want = sum(c.train.budget // c.train.batch_size * cost.estimated_flops(c) for c in configs)
    assert abs(est["train_flops"] - want) <= 1e-9 * want
    assert est["cpu_core_s"] / 2 <= est["cpu_wall_s"] + 1e-9 <= est["cpu_core_s"] + 1e-9
    assert est["gpu_s"] > 0
    done = {c.run_id for c in configs[:2]}
    part = cost.estimate(configs, workers=2, finished=done)
    assert part["to_run"] == len(configs) - 2 and part["cpu_core_s"] < est["cpu_core_s"]
    assert part["train_flops"] < est["train_flops"]
    # a run that goes on from a checkpoint at half its steps counts only its other half
    c = configs[0]
    half = c.train.budget // c.train.batch_size // 2
    one = cost.estimate([c], workers=1)
    resumed = cost.estimate([c], workers=1, started={c.run_id: half})
    assert resumed["to_run"] == 1 and resumed["resumed"] == 1 and one["resumed"] == 0
    assert abs(resumed["train_flops"] - one["train_flops"] / 2) <= 1e-6 * one["train_flops"]
    assert 0.4 * one["cpu_core_s"] <= resumed["cpu_core_s"] <= 0.6 * one["cpu_core_s"]
    assert "1 go on from a checkpoint" in cost.report("x", resumed)


def test_a_fixed_shape_task_is_estimated_at_its_counted_flops():
    configs = EXPERIMENTS.get("dyck-fig2")().plan("quick")  # three lengths: all counted, none extrapolated
    est = cost.estimate(configs, workers=1)
    want = sum(c.train.budget // c.train.batch_size * step_flops(c) for c in configs)
    assert abs(est["train_flops"] - want) <= 1e-9 * want


def test_a_variable_length_step_is_estimated_at_the_mean_of_real_training_batches():
    """Oracle: FLOPs counted on 24 training batches as the engine draws them (lengths U{10..N})."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from archsep.models.attention import use_attention

    configs = [c for c in EXPERIMENTS.get("lookup-fig2")().plan("quick") if c.seed == 0]
    cost.step_costs(configs)
    c = max((c for c in configs if c.arch == "tf-preln"), key=lambda c: c.task_params["N"])
    task = c.build_task()
    model = use_attention(c.model_config().build(task.spec), "explicit")
    model.prune_to_readout()
    g, counted = torch.Generator().manual_seed(1), []
    for _ in range(24):
        batch = task.sample(c.train.batch_size, g)
        with FlopCounterMode(display=False) as fc:
            task.loss(model(batch.x), batch).backward()
        counted.append(fc.get_total_flops())
    mean = sum(counted) / len(counted)
    assert 0.8 * mean <= cost.estimated_flops(c) <= 1.25 * mean, (cost.estimated_flops(c), mean)


def test_evaluations_follow_the_schedule():
    (c,) = [c for c in EXPERIMENTS.get("lookup-fig2")().plan("quick")][:1]
    n, examples = cost.evaluations(c, 4000)
    assert n == 4000 // c.train.eval_every
    assert examples == n * c.train.eval_size  # size presets evaluate in full ("every")


def test_dry_run_prints_costs_and_creates_nothing(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "archsep", "reproduce", "qstr-fig1a", "--quick", "--dry-run",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "GFLOP/step" in p.stdout and "on this machine about" in p.stdout and "H100" in p.stdout
    for label in ("TF", "RNN", "FFN"):
        assert f"\n  {label} " in p.stdout
    assert not out.exists()


def _fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("ARCHSEP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(timing, "_STEPS", {})
    monkeypatch.setattr(timing, "_HOW", {})
    monkeypatch.setattr(timing, "_BUSY", {})
    monkeypatch.setattr(timing, "_load", lambda: 0.0)  # an idle machine, whatever else runs beside the tests


def test_a_time_measured_on_a_busy_machine_is_used_said_and_never_kept(monkeypatch, tmp_path):
    """Timed while other work keeps every core busy, a step measures the contention too: the dry
    run uses it (an upper bound) and says so, but the cache does not keep it, so a later dry run on
    the idle machine times the step again rather than reading the busy time as this machine's."""

    _fresh(monkeypatch, tmp_path)
    configs = EXPERIMENTS.get("qstr-fig1a")().plan("quick")[:3]
    monkeypatch.setattr(timing, "_load", lambda: float(timing.cores()))
    busy = cost.estimate(configs)
    assert busy["shapes"]["timed"] >= 1 and busy["busy_load"] == float(timing.cores())
    assert "upper bounds, and were not kept" in cost.report("x", busy)
    assert not (tmp_path / cost.CACHE_NAME).exists() or cost._read_cache() == {}
    # a new process on the idle machine: times them again, says nothing of load, keeps them
    monkeypatch.setattr(timing, "_STEPS", {})
    monkeypatch.setattr(timing, "_HOW", {})
    monkeypatch.setattr(timing, "_BUSY", {})
    monkeypatch.setattr(timing, "_load", lambda: 0.0)
    idle = cost.estimate(configs)
    assert idle["shapes"]["timed"] == busy["shapes"]["timed"] and idle["busy_load"] is None
    assert "not kept" not in cost.report("x", idle) and len(cost._read_cache()) == idle["shapes"]["timed"]


def test_a_step_cost_ignores_the_seed_and_lr_and_a_family_times_only_its_shortest_lengths(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path)
    import dataclasses

    one = EXPERIMENTS.get("lookup-fig2")().plan("quick")  # variable lengths: the seed is in group_key
    configs = one + [dataclasses.replace(c, seed=c.seed + 1) for c in one]
    assert len({cost.cost_key(c) for c in configs}) == len({cost.cost_key(c) for c in one}) < len(
        {cost.group_key(c) for c in configs})
    timed = []
    real = cost.step_cost
    monkeypatch.setattr(timing, "step_cost", lambda c: (timed.append(c), real(c))[1])
    est = cost.estimate(configs, workers=2)
    fams: dict = {}
    for c in configs:
        fam, N = cost._family(c)
        fams.setdefault(fam, set()).add(N)
    assert len({cost.cost_key(c) for c in timed}) == len(timed)  # each shape timed once
    for fam, Ns in fams.items():
        got = sorted(cost._family(c)[1] for c in timed if cost._family(c)[0] == fam)
        assert got == sorted(Ns)[:cost.TIMED_LENGTHS], (fam, got)
    assert est["shapes"]["timed"] == len(timed) and est["shapes"]["extrapolated"] == sum(
        max(0, len(Ns) - cost.TIMED_LENGTHS) for Ns in fams.values())
    # a second dry run in a new process reads them all from the cache: nothing is timed again,
    # and no step's FLOPs at its longest length are counted again (kept beside its time)
    from archsep.engine import planning

    monkeypatch.setattr(timing, "_STEPS", {})
    monkeypatch.setattr(planning, "_FLOPS", {})
    monkeypatch.setattr(planning, "_OPS", {})
    counted = []
    real_count = planning._count_step
    monkeypatch.setattr(planning, "_count_step", lambda c, longest=False: (counted.append(longest),
                                                                           real_count(c, longest))[1])
    timed.clear()
    again = cost.estimate(configs, workers=2)
    assert timed == [] and again["shapes"]["cached"] == est["shapes"]["timed"]
    assert True not in counted, f"{counted.count(True)} longest-length FLOP counts repeated"
    assert abs(again["cpu_core_s"] - est["cpu_core_s"]) <= 1e-6 * est["cpu_core_s"]


def test_the_cache_is_used_only_on_the_same_machine_and_code_and_a_damaged_one_is_ignored(monkeypatch, tmp_path):
    import json

    _fresh(monkeypatch, tmp_path)
    configs = EXPERIMENTS.get("qstr-fig1a")().plan("quick")[:3]
    cost.estimate(configs)
    doc = json.loads((tmp_path / cost.CACHE_NAME).read_text())
    assert doc["fingerprint"] == cost.fingerprint() and doc["costs"]
    doc["fingerprint"] = "another machine"
    (tmp_path / cost.CACHE_NAME).write_text(json.dumps(doc))
    assert cost._read_cache() == {}
    negative = json.dumps({"fingerprint": cost.fingerprint(), "costs": {"k": [-1, 0, 0]}})
    for junk in ("{", "[]", '{"fingerprint": 1}', negative):
        (tmp_path / cost.CACHE_NAME).write_text(junk)
        assert cost._read_cache() == {}
        monkeypatch.setattr(timing, "_STEPS", {})
        assert cost.estimate(configs)["shapes"]["timed"] >= 1  # measured again, no error
    assert sorted(p.name for p in tmp_path.iterdir()) == [cost.CACHE_NAME]  # no temporary files left
    monkeypatch.setenv("ARCHSEP_CACHE_DIR", "")  # off
    assert cost.cache_file() is None


def test_extrapolation_is_linear_in_flops_and_never_shrinks():
    a, b = cost.StepCost(1.0, 0.1, 100.0, 50), cost.StepCost(2.0, 0.2, 200.0, 60)
    sc = cost._extrapolate([(10, a), (20, b)], 400.0, 40)
    assert abs(sc.cpu_s - 4.0) < 1e-12 and abs(sc.eval_s - 0.4) < 1e-12 and sc.ops == 80 and sc.flops == 400.0
    noisy = cost._extrapolate([(10, b), (20, a)], 400.0, 40)  # the longer one timed faster: proportional
    assert noisy.cpu_s >= a.cpu_s


@pytest.mark.parametrize("arch, params", [
    ("tf-preln", {"layers": 1, "width": 64, "heads": 1, "positions": "learned", "causal": True}),
    ("tf-preln", {"layers": 2, "width": 32, "heads": 4, "positions": "learned", "causal": True}),
    ("lstm", {"layers": 1, "hidden": 64}),
], ids=["tf-1-layer", "tf-2-layer", "lstm"])
def test_a_longer_lengths_flops_are_extrapolated_near_their_count(arch, params):
    """Oracle: the step's FLOPs counted at N = 200 and 400. A one-layer Transformer read at its
    last position is mostly a fixed part (its MLP and readout at one position); growth in
    proportion to N would price it at about twice its count at N = 400."""
    from archsep.config import RunConfig, TrainConfig
    from archsep.engine.planning import longest_step_flops

    by_N = {N: RunConfig("index-lookup", arch, {"N": N}, params, TrainConfig(batch_size=16))
            for N in (20, 50, 100, 200, 400)}
    est = timing._family_flops(sorted(by_N), by_N)
    for N in (200, 400):
        counted = longest_step_flops(by_N[N])
        assert 0.8 * counted <= est[N] <= 1.25 * counted, (N, est[N], counted)


def test_progress_weights_are_budget_flops_until_a_dry_run_has_timed_every_shape(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path)
    configs = EXPERIMENTS.get("qstr-fig1a")().plan("quick")
    w = cost.progress_weights(configs)
    assert set(w) == {c.run_id for c in configs}
    for c in configs[:5]:
        assert w[c.run_id] == c.train.budget // c.train.batch_size * step_flops(c)  # nothing timed
    cost.estimate(configs)  # a dry run: every shape timed (and cached)
    monkeypatch.setattr(timing, "_STEPS", {})  # a new process, the cache file alone
    timed = cost.progress_weights(configs)
    again = cost.step_costs(configs, measure=False)  # what the cache gives, timed or extrapolated
    assert again is not None
    for c in configs:
        assert timed[c.run_id] == c.train.budget // c.train.batch_size * again[cost.cost_key(c)].cpu_s
    gru = [c for c in configs if c.arch.startswith("rnn-b")]
    assert gru and min(timed[c.run_id] for c in gru) > 0
    # a run that goes on from its checkpoint weighs only the steps after the one saved
    a, b = configs[0], configs[1]
    steps = a.train.budget // a.train.batch_size
    left = cost.progress_weights(configs, {a.run_id: steps // 4, b.run_id: steps + 1})
    assert left[a.run_id] == (steps - steps // 4) * again[cost.cost_key(a)].cpu_s
    assert 0 < left[b.run_id] < 1e-9 and {k: v for k, v in left.items() if k not in (a.run_id, b.run_id)} == \
        {k: v for k, v in timed.items() if k not in (a.run_id, b.run_id)}


def test_the_progress_bar_reaches_its_end_and_counts_runs(tmp_path, capsys, monkeypatch):
    from archsep.config import RunConfig, TrainConfig
    from archsep.runs.runner import run_configs

    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    cfgs = [RunConfig("qstr", "ffn", {"N": N, "d": 4, "q": 1}, {}, TrainConfig(budget=640, eval_size=100), 0, "FFN")
            for N in (2, 3)]
    run_configs(cfgs, out_dir=tmp_path / "o", workers=1, progress=True)
    err = capsys.readouterr().err
    assert "100%" in err and "2/2 runs" in err


def test_a_curriculum_is_priced_stage_by_stage(monkeypatch):
    """Each stage's steps cost its own shape's step (the task at the stage's length), the rest
    the run's; the evaluations stay at the run's own length; the estimate times the stages."""
    from archsep import RunConfig, TrainConfig

    model = {"layers": 1, "width": 16, "heads": 2, "positions": "sinusoidal"}
    c = RunConfig("nearest-neighbour", "tf-preln", {"N": 16}, model,
                  TrainConfig(lr=1e-3, batch_size=8, budget=8 * 100, eval_every=50, eval_mode="every",
                              curriculum=((4, 30), (8, 20))))
    s4, s8 = cost.stage_configs(c)
    assert (s4.task_params["N"], s8.task_params["N"], s4.train.curriculum) == (4, 8, ())
    fake = {cost.cost_key(s4): cost.StepCost(1.0, 0.0, 10.0, 1), cost.cost_key(s8): cost.StepCost(2.0, 0.0, 20.0, 1),
            cost.cost_key(c): cost.StepCost(4.0, 0.5, 40.0, 1)}
    monkeypatch.setattr(timing, "_TRAIN", fake)
    cpu, _ = cost.run_seconds(c, 100)
    _, examples = cost.evaluations(c, 100)
    assert cpu == 30 * 1.0 + 20 * 2.0 + 50 * 4.0 + examples / cost.CHUNK * 0.5
    # a run stopped inside the first stage pays only for it
    assert cost.run_seconds(c, 10)[0] == 10 * 1.0 + cost.evaluations(c, 10)[1] / cost.CHUNK * 0.5


def test_the_gpu_estimate_saves_launches_only_for_models_the_engine_stacks(monkeypatch, tmp_path):
    """Seeds of a stackable model share their launches on a GPU; an LSTM's or Mamba's never stack
    (SeqModel.stackable), so each pays its own (the estimate read the config, which has no such
    attribute, and credited them)."""
    from archsep import RunConfig, TrainConfig

    monkeypatch.setenv("ARCHSEP_CACHE_DIR", str(tmp_path))
    t = TrainConfig(lr=1e-3, batch_size=8, budget=8 * 50, eval_every=50, eval_mode="every")
    for arch, params, stacks in (("lstm", {"hidden": 8}, False), ("mamba", {"layers": 1, "width": 8}, False),
                                 ("tf-preln", {"layers": 1, "width": 8, "heads": 1}, True)):
        runs = [RunConfig("dyck", arch, {"N": 6}, params, t, seed=s) for s in range(3)]  # one shape: seeds stack
        est = cost.estimate(runs, 1)
        alone = sum(cost.run_seconds(c, cost.planned_steps(c))[1] for c in runs)
        assert (est["gpu_s"] < alone * 0.99) == stacks, arch


class _FakeSteps:
    """A step whose durations are given, on a clock that only the steps advance."""

    def __init__(self, durations):
        self.durations, self.now, self.calls = list(durations), 0.0, 0

    def step(self):
        self.now += self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1

    def clock(self):
        return self.now


def test_a_step_cost_never_counts_the_first_full_step_whose_allocations_inflate_it():
    # a slow model: its first step (allocations) twice its later ones; one later step is timed
    slow = _FakeSteps([0.77, 0.35, 0.35])
    times = cost.steady_step_times(slow.step, slow.clock)
    assert len(times) == 1 and abs(times[0] - 0.35) < 1e-12 and slow.calls == 2
    # a fast model: TIMED_STEPS later steps, the first never among them
    fast = _FakeSteps([0.2] + [0.01] * 20)
    times = cost.steady_step_times(fast.step, fast.clock)
    assert len(times) == timing.TIMED_STEPS and all(abs(t - 0.01) < 1e-12 for t in times)
    # in between: steps until they took TIMED_S
    mid = _FakeSteps([0.5] + [0.1] * 20)
    assert len(cost.steady_step_times(mid.step, mid.clock)) == 3


def test_a_dry_run_schedules_the_runs_in_the_order_the_runner_starts_them(monkeypatch, tmp_path):
    """The wall time a dry run states schedules the batches in the runner's order: the same
    weights (remaining steps at each shape's step time), runs that go on from a checkpoint first.
    With one worker the runner finishes them in the order it starts them."""
    from archsep.engine.checkpoint import Checkpoints, save
    from archsep.sweeps import file as sw
    from archsep.runs.runner import run_configs
    from sweep_util import tiny_toml

    _fresh(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    configs = sw.parse(tiny_toml(Ns=(2, 3, 5), seeds=1, arms=("tf-b", "ffn"))).configs
    first = cost.estimate(configs, workers=1)["order"]
    assert sorted(first) == sorted(c.run_id for c in configs)  # one run a batch here
    last = next(c for c in configs if c.run_id == first[-1])
    for out, started in ((tmp_path / "new", {}), (tmp_path / "resumed", {last.run_id: 7})):
        if started:  # a checkpoint of the cheapest run (a state with only a step: it starts afresh)
            assert save(Checkpoints.beside(out), [last], {"step": 7})
        order = cost.estimate(configs, workers=1, started=started)["order"]
        assert order == ([last.run_id, *first[:-1]] if started else first)
        seen: list = []
        run_configs(configs, out, workers=1, progress=False, on_result=seen.append)
        assert [r.run_id for r in seen] == order
