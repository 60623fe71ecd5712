"""Contract checks (archsep.testing): every registered task and model passes them, and they do
catch the faults they are for (a check that cannot fail proves nothing)."""
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from archsep.cli import main
from archsep.errors import ArchsepError
from archsep.models import MODELS
from archsep.models.base import ModelConfig, SeqModel, input_layer
from archsep.registry import Registry
from archsep.tasks import TASKS
from archsep.tasks.base import Batch, Task
from archsep.tasks.index_lookup import IndexLookup
from archsep.testing import DEFAULT_TASKS, check_all, check_model, check_task


# --- every registered extension keeps its contract ----------------------------------------------
@pytest.mark.parametrize("name", TASKS.names())
def test_registered_task_keeps_the_contract(name):
    passed = check_task(name)
    assert {"builds", "spec", "sample-shapes", "determinism", "seeds-differ", "labels-vary", "loss-metric",
            "baseline"} <= set(passed)
    assert ("trivial-baselines" in passed) == (TASKS.get(name).kind == "classification")


@pytest.mark.parametrize("name", MODELS.names())
def test_registered_model_keeps_the_contract(name):
    passed = check_model(name)
    for task, _ in DEFAULT_TASKS:  # one task per input kind
        assert {f"output-shape[{task}]", f"pruned-output[{task}]", f"gradients[{task}]", f"fits[{task}]"} <= set(passed)


# --- the checks catch broken tasks --------------------------------------------------------------
class GlobalRng(IndexLookup):
    def sample(self, n, generator):  # ignores the generator: draws from the global RNG
        return super().sample(n, torch.Generator().manual_seed(int(torch.randint(0, 2**31, (1,)))))


class FixedSeed(IndexLookup):
    def sample(self, n, generator):  # ignores the generator: one fixed stream
        return super().sample(n, torch.Generator().manual_seed(0))

    def sample_test(self, n, generator):
        return self.sample(n, generator)


class ConstantLabels(IndexLookup):
    def sample_length(self, n, k, generator):
        b = super().sample_length(n, k, generator)
        return Batch(b.x, torch.zeros_like(b.y))


class FloatLabels(IndexLookup):
    def sample_length(self, n, k, generator):
        b = super().sample_length(n, k, generator)
        return Batch(b.x, b.y.float())


class WrongBaseline(IndexLookup):
    @property
    def chance_accuracy(self):  # labels are uniform over `vocab` symbols, not fair coins
        return 0.5


class WrongConstant(IndexLookup):
    def trivial_baselines(self, n, generator):  # 1/2, not the 1/vocab of uniform symbols
        return {**super().trivial_baselines(n, generator), "constant": 0.5}


class NoConstant(IndexLookup):
    def trivial_baselines(self, n, generator):
        return {"sequence-mode": super().trivial_baselines(n, generator)["sequence-mode"]}


class PercentBaselines(IndexLookup):
    def trivial_baselines(self, n, generator):  # percentages, not accuracies
        return {k: 100 * v for k, v in super().trivial_baselines(n, generator).items()}


class GlobalRngBaselines(IndexLookup):
    def trivial_baselines(self, n, generator):
        return super().trivial_baselines(n, torch.Generator().manual_seed(int(torch.randint(0, 2**31, (1,)))))


class WrongLength(IndexLookup):
    def sample_test(self, n, generator):  # one symbol longer than spec.seq_len allows
        b = self.sample_length(n, self.N, generator)
        return Batch(torch.cat([b.x[:, :1], b.x], 1), b.y)


@pytest.mark.parametrize("cls, failed", [
    (GlobalRng, "generator-only"),
    (FixedSeed, "seeds-differ"),
    (ConstantLabels, "labels-vary"),
    (FloatLabels, "sample-shapes"),
    (WrongBaseline, "baseline"),
    (WrongLength, "sample-test-shapes"),
    (WrongConstant, "trivial-baselines"),
    (NoConstant, "trivial-baselines"),
    (PercentBaselines, "trivial-baselines"),
    (GlobalRngBaselines, "trivial-baselines"),
])
def test_broken_task_fails_the_named_check(cls, failed):
    with pytest.raises(ArchsepError) as e:
        check_task(cls(N=8, vocab=4))
    msg = str(e.value)
    assert f"check '{failed}' failed" in msg and "task 'index-lookup'" in msg and "\n" not in msg, msg


class DefaultBaselines(IndexLookup):
    trivial_baselines = Task.trivial_baselines  # as a plugin task that defines none has them


def test_a_task_without_its_own_trivial_baselines_passes_with_the_constant():
    t = DefaultBaselines(N=8, vocab=4)
    assert "trivial-baselines" in check_task(t)
    assert t.trivial_baselines(16, torch.Generator().manual_seed(0)) == {"constant": 0.25}
    assert t.best_trivial(16, torch.Generator().manual_seed(0)) == ("constant", 0.25)


def test_task_errors_are_one_line_and_name_the_cause():
    with pytest.raises(ArchsepError, match=r"unknown value 'index-lokup' \(did you mean 'index-lookup'\?\)"):
        check_task("index-lokup")
    with pytest.raises(ArchsepError, match=r"task 'qstr' \(N=0\): check 'builds' failed: N: must be >= 1"):
        check_task("qstr", N=0)
    with pytest.raises(ArchsepError, match="not an instance"):
        check_task(IndexLookup(N=4), N=4)


# --- the checks catch broken models -------------------------------------------------------------
class Broken(SeqModel):
    def __init__(self, spec, fault):
        super().__init__()
        self.fault = fault
        self.embed = input_layer(spec, 16)
        self.mix = nn.Linear(16, 16)
        self.head = nn.Linear(16, spec.output_dim)

    def forward(self, x):
        h = torch.tanh(self.mix(torch.tanh(self.embed(x))))
        if self.fault == "constant":  # the output ignores the input: it cannot fit anything
            h = 0 * h
        out = self.head(h)
        if self.fault == "shape":
            return out[:, 1:]
        if self.fault == "nan":
            return out * float("nan")
        if self.fault == "random":
            return out + torch.rand_like(out)
        if self.fault == "batch":  # normalised over the batch
            return out - out.mean(0, keepdim=True)
        if self.fault == "detached":
            return out.detach()
        return out


@dataclass(frozen=True)
class BrokenConfig(ModelConfig):
    fault: str = "none"
    registry_name = "broken"

    def build(self, spec):
        return Broken(spec, self.fault)


SMALL = ("qstr", {"N": 4, "d": 2})


def test_the_broken_model_without_a_fault_passes():  # so the faults below are what fails
    assert "fits[qstr]" in check_model(BrokenConfig(), *SMALL)


@pytest.mark.parametrize("fault, failed", [
    ("shape", "output-shape"),
    ("nan", "finite-output"),
    ("random", "deterministic"),
    ("batch", "batch-independent"),
    ("detached", "gradients"),
    ("constant", "fits"),
])
def test_broken_model_fails_the_named_check(fault, failed):
    with pytest.raises(ArchsepError) as e:
        check_model(BrokenConfig(fault), *SMALL)
    msg = str(e.value)
    assert f"check '{failed}[qstr]' failed" in msg and "model 'broken'" in msg and "\n" not in msg, msg


def test_model_errors_are_one_line_and_name_the_cause():
    with pytest.raises(ArchsepError, match=r"unknown value 'mamab' \(did you mean 'mamba'\?\)"):
        check_model("mamab")
    with pytest.raises(ArchsepError, match=r"check 'builds\[qstr\]' failed: arch 'ffn': unknown key 'widht'"):
        check_model("ffn", "qstr", {"N": 4}, widht=3)


def test_checks_leave_the_global_rng_alone():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    check_task("index-lookup", N=8)
    check_model(BrokenConfig(), *SMALL)
    assert torch.equal(state, torch.get_rng_state())


def test_check_all_reports_each_name(monkeypatch):
    class Constant(ConstantLabels):  # its own class: registering names it
        pass

    tasks, models = Registry("task"), Registry("arch")
    for name, cls in (("index-lookup", IndexLookup), ("qstr", TASKS.get("qstr")), ("constant-labels", Constant)):
        tasks.register(name)(cls)  # the real classes under their own names: left as they were
    models.register("broken")(BrokenConfig)
    monkeypatch.setattr("archsep.testing.TASKS", tasks)
    monkeypatch.setattr("archsep.testing.MODELS", models)
    monkeypatch.setattr("archsep.testing.DEFAULT_TASKS", (SMALL,))
    out = check_all()
    assert set(out["tasks"]) == {"index-lookup", "qstr", "constant-labels"} and set(out["models"]) == {"broken"}
    assert "baseline" in out["tasks"]["index-lookup"]
    assert "check 'labels-vary' failed" in out["tasks"]["constant-labels"]
    assert "fits[qstr]" in out["models"]["broken"]


# --- command line -------------------------------------------------------------------------------
def run_cli(*args):
    p = subprocess.run([sys.executable, "-m", "archsep", *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def one_error_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("archsep: error: "), err
    return lines[0]


def test_cli_check_task_prints_each_check_then_ok():
    code, out, err = run_cli("check-task", "index-lookup")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[-1] == "ok" and "determinism" in lines and "baseline" in lines


def test_cli_unknown_name_is_one_line_exit_2():
    code, out, err = run_cli("check-task", "no-such-task")
    assert code == 2 and "unknown value 'no-such-task'" in one_error_line(err), (out, err)


def test_cli_check_model_on_one_task(capsys):  # in process: the same main() as `python -m archsep`
    assert main(["check-model", "ffn", "--task", "qstr", "--task-param", "N=4", "--param", "hidden=[16]"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "ok" and "fits[qstr]" in lines


@pytest.mark.parametrize("args, needle", [
    (["check-task", "qstr", "--param", "N=0"], "task 'qstr' (N=0): check 'builds' failed"),
    (["check-task", "qstr", "--param", "N"], "--param: expected KEY=VALUE"),
    (["check-model", "no-such-arch"], "unknown value 'no-such-arch'"),
    (["check-model", "ffn", "--task-param", "N=4"], "--task-param: given without --task"),
])
def test_cli_failures_are_one_line_exit_2(args, needle, capsys):
    assert main(args) == 2
    assert needle in one_error_line(capsys.readouterr().err)
