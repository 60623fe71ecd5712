"""The recurrent contract's properties (`archsep.testing.check_step_form`, which `check_model`
runs too) for every registered model, found in the registry: a new mixer needs no edit here.
For each model with a step form, in float64: later inputs do not change earlier outputs, the
step form run over the sequence equals the parallel form (values and parameter gradients, also
pruned), and it carries `state_size` floats; on the default tasks, on 40 positions (across the
chunks of 16 and 32 of the chunked forms), and on variants that take other code paths. Causal
models without a step form are checked for causality; every registered model trains stacked
under vmap. And the checks catch a plugin model whose step form is broken."""
import dataclasses
from dataclasses import dataclass

import pytest
import torch
from mixer_util import assert_stack_matches
from torch import nn

from archsep.errors import ArchsepError
from archsep.models import MODELS, make_model_config
from archsep.models.base import ModelConfig, SeqModel, input_layer
from archsep.models.mixers.stack import MixerStack
from archsep.tasks import TASKS
from archsep.tasks.base import TaskSpec
from archsep.testing import DEFAULT_TASKS, TOKEN_PARAMS, check_model, check_step_form

# Small sizes for every config that has these fields (a config that rejects them runs at its defaults)
SHRINK = {"layers": 2, "width": 8, "heads": 2, "d_state": 4, "hidden": 8, "feature_dim": 4, "filter_width": 8,
          "window": 5}
PROBE = TaskSpec(input="vector", input_dim=3, seq_len=8, output_dim=2, readout="all")
LONG = [("qstr", {"N": 40, "d": 2}), ("index-lookup", {"N": 40, "vocab": 8})]  # 40 and <= 41 positions


def small(arch: str) -> dict:
    fields = {f.name for f in dataclasses.fields(MODELS.get(arch))}
    params = {k: v for k, v in SHRINK.items() if k in fields}
    try:
        make_model_config(arch, **params).build(PROBE)
    except ArchsepError:
        return {}
    return params


def _kind(arch: str) -> str:
    torch.manual_seed(0)
    net = make_model_config(arch, **small(arch)).build(PROBE)
    return "stack" if isinstance(net, MixerStack) else "step" if net.has_step() else \
        "causal" if net.is_causal() else "neither"


KINDS = {arch: _kind(arch) for arch in MODELS.names()}
STACKS = [a for a, k in KINDS.items() if k == "stack"]  # the block stack's mixers, all with a step form
STEP = [a for a, k in KINDS.items() if k in ("stack", "step")]
CAUSAL_ONLY = [a for a, k in KINDS.items() if k == "causal"]

# Configurations whose code paths the defaults above do not reach
VARIANTS = [
    ("mamba", {"layers": 1, "width": 8, "d_state": 3, "positions": "learned"}),
    ("mamba", {"layers": 2, "width": 8, "d_state": 2, "positions": "sinusoidal"}),
    ("retnet", {"layers": 1, "width": 8, "heads": 1}),
    ("retnet", {"layers": 2, "width": 12, "heads": 3, "rotation": False, "positions": "learned"}),
    ("retnet", {"layers": 1, "width": 12, "heads": 2, "positions": "sinusoidal", "mlp_width": 8}),
    ("linear-tf", {"layers": 2, "width": 12, "heads": 3, "feature": "relu"}),
    ("linear-tf", {"layers": 1, "width": 12, "heads": 2, "feature": "relu", "positions": "none"}),
    ("linear-tf", {"layers": 2, "width": 8, "heads": 2, "feature": "taylor"}),
    ("linear-tf", {"layers": 1, "width": 12, "heads": 3, "feature": "taylor", "feature_dim": 2, "positions": "none"}),
    ("gla", {"layers": 1, "width": 12, "heads": 3, "tau": 1.0, "positions": "learned", "mlp_width": 8}),
    ("mamba2", {"layers": 2, "width": 8, "heads": 4, "d_state": 3, "groups": 2}),
    ("mamba2", {"layers": 1, "width": 6, "heads": 3, "d_state": 5, "expand": 1, "d_conv": 1, "positions": "learned"}),
    ("deltanet", {"layers": 1, "width": 8, "heads": 2, "gated": True}),
    ("deltanet", {"layers": 2, "width": 12, "heads": 3, "gated": True, "positions": "sinusoidal"}),
    ("swa", {"layers": 1, "width": 8, "heads": 2, "window": 1}),
    ("swa", {"layers": 1, "width": 12, "heads": 3, "window": 64, "rope": False, "positions": "learned"}),
    ("baseconv", {"layers": 2, "width": 6, "kernel": 4, "short": 1}),
    ("baseconv", {"layers": 1, "width": 4, "kernel": 7, "short": 2, "positions": "sinusoidal"}),
    ("rwkv", {"layers": 2, "width": 6, "positions": "learned", "mlp_width": 5}),
    ("hyena", {"layers": 2, "width": 6, "kernel": 4, "short": 1, "filter_width": 5}),
    ("hyena", {"layers": 1, "width": 4, "kernel": 7, "short": 2, "positions": "sinusoidal"}),
    ("h3", {"layers": 2, "width": 6, "heads": 6, "d_state": 3, "shift": 1}),
    ("h3", {"layers": 1, "width": 8, "heads": 1, "d_state": 2, "shift": 2, "positions": "learned"}),
    ("based", {"layers": 3, "width": 12, "heads": 3, "feature_dim": None, "window": 1, "rope": False,
               "positions": "learned", "mlp_width": 8}),  # [linear, swa, linear], features at the head width 4
    ("based", {"layers": 3, "width": 8, "heads": 1, "feature_dim": 4, "window": 64, "window_every": 3,
               "positions": "sinusoidal"}),  # [linear, linear, swa], a window longer than the sequence
    ("mamba", {"layers": 1, "width": 8, "d_state": 4, "scan": "parallel", "norm": "layer"}),
    ("mamba", {"layers": 3, "width": 6, "d_state": 5, "expand": 3, "d_conv": 2, "scan": "sequential"}),
    ("s4d", {"layers": 2, "width": 6, "d_state": 5, "mode": "sequential"}),
]


def _ids(cases):
    return [f"{a}-{'-'.join(f'{k}={v}' for k, v in p.items())}" for a, p in cases]


def _expected(tasks, names=("causal", "recurrent", "state-size")):
    return {f"{n}[{t}]" for t in tasks for n in names}


def test_the_registry_has_models_with_a_step_form():
    assert {"mamba", "s4d", "retnet", "gla", "hyena"} <= set(STEP) and "tf-preln" in CAUSAL_ONLY
    assert {"retnet", "linear-tf", "based"} <= set(STACKS) and "mamba" not in STACKS


@pytest.mark.parametrize("arch", STEP)
def test_every_model_with_a_step_form_keeps_the_recurrent_contract(arch):
    assert _expected([t for t, _ in DEFAULT_TASKS]) <= set(check_step_form(arch, **small(arch)))


@pytest.mark.parametrize("task, task_params", LONG, ids=[t for t, _ in LONG])
@pytest.mark.parametrize("arch", STEP)
def test_the_forms_agree_across_chunk_boundaries(arch, task, task_params):
    assert _expected([task]) <= set(check_step_form(arch, task, task_params, **small(arch)))


@pytest.mark.parametrize("task, task_params", LONG, ids=[t for t, _ in LONG])
@pytest.mark.parametrize("arch, params", VARIANTS, ids=_ids(VARIANTS))
def test_variants_keep_the_recurrent_contract(arch, params, task, task_params):
    assert _expected([task]) <= set(check_step_form(arch, task, task_params, **params))


@pytest.mark.parametrize("arch", CAUSAL_ONLY)
def test_causal_models_without_a_step_form_are_checked_for_causality(arch):
    passed = check_step_form(arch, **small(arch))
    assert _expected([t for t, _ in DEFAULT_TASKS], ("causal",)) <= set(passed)
    assert not any(p.startswith("recurrent") for p in passed)


@pytest.mark.parametrize("arch", MODELS.names())
def test_models_train_stacked_under_vmap(arch):
    """The engine trains seeds of small models as one vmapped computation: same outputs and gradients."""
    spec = TaskSpec(input="tokens", input_dim=11, seq_len=9, output_dim=4, readout="last")
    params = {**small(arch), **TOKEN_PARAMS.get(arch, {})}
    params.update({"layers": 1} if "layers" in params else {})  # float32 gradients, compared to 1e-4
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        models.append(make_model_config(arch, **params).build(spec))
    xs = [torch.randint(0, 11, (3, 9), generator=torch.Generator().manual_seed(s)) for s in (0, 1)]
    assert_stack_matches(models, xs)


@pytest.mark.parametrize("arch", STACKS)
def test_a_pruned_block_stack_computes_the_last_position_alone(arch):
    """Pruned for a last-position readout, a model of the block stack gives (B, 1, C), the full
    model's last position (that its step form ignores pruning: `check_model`'s 'recurrent')."""
    spec = TaskSpec(input="tokens", input_dim=11, seq_len=13, output_dim=4, readout="last")
    torch.manual_seed(0)
    model = make_model_config(arch, **small(arch)).build(spec)
    x = torch.randint(0, 11, (3, 13), generator=torch.Generator().manual_seed(0))
    full = model(x)
    model.prune_to_readout()
    last = model(x)
    assert last.shape == (3, 1, 4)
    torch.testing.assert_close(last[:, 0], full[:, -1], rtol=0, atol=1e-6)


# --- the contract on every classification task ----------------------------------------------------
CLASSIFICATION = [n for n in TASKS.names() if TASKS.get(n).kind == "classification"]
TASK_PARAMS = {"dyck": {"N": 8}, "equality": {"N": 8}, "index-lookup": {"N": 6, "vocab": 6},
               "nearest-neighbour": {"N": 8, "d": 4},
               # the field's token tasks (docs/token_tasks.md), at their docstring examples' sizes
               "mqar": {"N": 16, "vocab": 16, "pairs": 4}, "in-context-recall": {"N": 12, "vocab": 16},
               "noisy-recall": {"N": 12, "vocab": 32, "noise_vocab": 16},
               "fuzzy-recall": {"N": 17, "vocab": 16, "key_len": 2, "value_len": 2},
               "selective-copying": {"N": 12, "vocab": 16, "tokens": 3}, "compression": {"N": 5, "vocab": 16},
               "memorization": {"N": 8, "vocab": 16}}
TASK_PARAMS.update({  # the formal-language tasks (Deletang et al. 2023)
    "parity": {"N": 6}, "even-pairs": {"N": 6}, "modular-arithmetic": {"N": 5}, "reverse-string": {"N": 4},
    "duplicate-string": {"N": 4}, "stack-manipulation": {"N": 4}})
ON_EVERY_TASK = [("retnet", {}), ("linear-tf", {}), ("gla", {}), ("mamba2", {"d_state": 4}), ("deltanet", {}),
                 ("deltanet", {"gated": True})]


@pytest.mark.parametrize("task", CLASSIFICATION)
@pytest.mark.parametrize("arch, params", ON_EVERY_TASK, ids=_ids(ON_EVERY_TASK))
def test_contract_on_every_classification_task(arch, params, task):
    assert task in TASK_PARAMS, f"add small parameters for the new task '{task}' to this test"
    passed = check_model(arch, task, TASK_PARAMS[task], layers=1, width=16, heads=2, **params)
    assert {f"fits[{task}]", f"gradients[{task}]", f"recurrent[{task}]", f"causal[{task}]"} <= set(passed)


# --- the checks catch a broken step form ----------------------------------------------------------
class Decayed(SeqModel):
    """out_t = head(tanh(mix([h_t, s_t]))), h_t = tanh(embed(x_t)), s_t = a ⊙ s_{t-1} + h_t with a
    learned decay a in (0, 1): in parallel form a decay matrix, in step form the recurrence. `fault`
    breaks one property."""

    W = 16

    def __init__(self, spec, fault):
        super().__init__()
        self.fault = fault
        self.embed = input_layer(spec, self.W)
        self.decay = nn.Parameter(torch.zeros(self.W))
        self.mix = nn.Linear(2 * self.W, self.W)
        self.head = nn.Linear(self.W, spec.output_dim)

    def forward(self, x):
        h = torch.tanh(self.embed(x))  # (B, L, W)
        t = torch.arange(h.shape[1], device=h.device)
        lag = t[:, None] - t[None, :]  # (L, L)
        a = torch.sigmoid(self.decay)[:, None, None] ** lag.clamp(min=0)  # (W, L, L)
        mask = lag >= 0 if self.fault != "future" else lag >= -1  # "future": s_t also takes h_{t+1}
        s = torch.einsum("wts,bsw->btw", a * mask, h)  # (B, L, W)
        return self.head(torch.tanh(self.mix(torch.cat([h, s], -1))))  # (B, L, C)

    def init_state(self, batch, device=None, dtype=None):
        return {"s": torch.zeros(batch, self.W, device=device, dtype=dtype)}

    def step(self, x_t, state, t):
        h = torch.tanh(self.embed(x_t))  # (B, W)
        a = torch.sigmoid(self.decay)
        if self.fault == "forgets":  # the state is overwritten, not decayed
            s = h
        elif self.fault == "detached":  # the right values, but no gradient to the decay
            s = a.detach() * state["s"] + h
        else:
            s = a * state["s"] + h
        new = {"s": s, "copy": s.clone()} if self.fault == "size" else {"s": s}
        return self.head(torch.tanh(self.mix(torch.cat([h, s], -1)))), new

    def state_size(self, seq_len):
        return self.W


@dataclass(frozen=True)
class DecayedConfig(ModelConfig):
    fault: str = "none"
    registry_name = "decayed"

    def build(self, spec):
        return Decayed(spec, self.fault)


SMALL = ("qstr", {"N": 6, "d": 2})


def test_a_plugin_with_a_correct_step_form_passes_check_model():
    passed = check_model(DecayedConfig(), *SMALL)
    assert _expected(["qstr"]) | {"fits[qstr]"} <= set(passed)
    assert _expected(["index-lookup"]) <= set(check_step_form(DecayedConfig(), "index-lookup", {"N": 6, "vocab": 4}))


@pytest.mark.parametrize("fault, failed, says", [
    ("forgets", "recurrent", "differs from the parallel forward"),
    ("detached", "recurrent", "the gradient of decay through the step form differs"),
    ("future", "causal", "changed the outputs at positions <= 0"),
    ("size", "state-size", "carries [32] floats per sequence, state_size(6) says 16"),
])
def test_a_plugin_with_a_broken_step_form_fails_check_model(fault, failed, says):
    with pytest.raises(ArchsepError) as e:
        check_model(DecayedConfig(fault), *SMALL)
    msg = str(e.value)
    assert f"check '{failed}[qstr]' failed" in msg and says in msg and "model 'decayed'" in msg, msg
    assert "\n" not in msg


def test_check_step_form_names_an_unknown_model_and_needs_a_task_for_task_params():
    with pytest.raises(ArchsepError, match=r"unknown value 'mamab'"):
        check_step_form("mamab")
    with pytest.raises(ArchsepError, match="check_step_form: task_params given without a task"):
        check_step_form("retnet", task_params={"N": 4})
    assert TASKS.get("qstr")  # the default tasks are registered
