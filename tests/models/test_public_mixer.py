"""A mixer alone as a plugin (docs/extending.md, section 8): the example file
examples/plugins/mingru.py, loaded by archsep's plugin loader, gets the built-in mixers' stack
from the public `Mixer` / `MixerConfig`, passes the model contract (causal, step form = parallel
form, state size), trains through the engine (alone and stacked) and plans in its sweep beside
built-ins; a step form that disagrees with the parallel one fails the contract. Each test loads
the plugin afresh and leaves nothing registered, imported or noted for the workers."""
from __future__ import annotations

import contextlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import torch
from mixer_util import assert_stack_matches, inputs

import archsep
from archsep import MODELS, ArchsepError, plugins
from archsep.config import RunConfig, TrainConfig
from archsep.engine.train import train_run
from archsep.models.mixers import stack
from archsep.tasks.base import TaskSpec
from archsep.testing import DEFAULT_TASKS, check_model

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugins" / "mingru.py"
SWEEP = ROOT / "examples" / "plugins" / "mingru.toml"
DOC = ROOT / "docs" / "extending.md"
NAME = "mingru"
SMALL = {"layers": 1, "width": 16}
PUBLIC = ("Mixer", "MixerConfig", "MixerStack")


@contextlib.contextmanager
def loaded() -> Iterator:
    """The example plugin imported as `--import` imports it; afterwards MODELS is as it was (no
    'mingru'), the module is forgotten (the next load registers it again) and so is the note
    that workers should import it."""
    modules, path = dict(plugins._MODULES), list(sys.path)
    with MODELS.temporary(NAME, None):  # whatever the plugin registers under the name, undone
        name = plugins.load(str(PLUGIN))
        try:
            yield sys.modules[name]
        finally:
            sys.modules.pop(name, None)
            plugins._MODULES.clear()
            plugins._MODULES.update(modules)
            sys.path[:] = path


@pytest.fixture
def mingru():
    with loaded() as module:
        yield module


def doc_blocks() -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"```\w+ title=(\S+)\n(.*?)```", DOC.read_text(), re.S)}


def test_the_stack_is_public():
    assert set(PUBLIC) <= set(archsep.__all__)
    assert (archsep.Mixer, archsep.MixerConfig, archsep.MixerStack) == (stack.Mixer, stack.MixerConfig,
                                                                        stack.MixerStack)
    spec = TaskSpec("tokens", 6, 8, 6, "last")
    for arch in ("gla", "retnet", "mamba2", "based"):  # the built-ins sit in the same stack
        assert isinstance(MODELS.build(arch, layers=1, width=16).build(spec), archsep.MixerStack), arch
    with pytest.raises(TypeError, match="abstract"):  # a MixerConfig is a base: its mixer is the subclass's
        archsep.MixerConfig()  # type: ignore[abstract]


def test_the_doc_shows_the_example_files_as_they_are():
    blocks = doc_blocks()
    assert blocks["mingru.py"] == PLUGIN.read_text() and blocks["mingru.toml"] == SWEEP.read_text()
    assert len([line for line in PLUGIN.read_text().splitlines() if line.strip()]) <= 60
    assert "no sequence-mixer building blocks library" not in DOC.read_text()


def test_the_plugin_mixer_passes_the_model_contract(mingru):
    cfg = MODELS.build(NAME, **SMALL, expand=2)
    assert isinstance(cfg, archsep.MixerConfig) and cfg.short_name() == "mingru-(1,16)"
    net = cfg.build(TaskSpec("vector", 3, 8, 2, "all"))
    assert isinstance(net, archsep.MixerStack) and net.has_step() and net.state_size(8) == 1 * 2 * 16
    passed = check_model(NAME)  # the defaults, as `archsep check-model mingru` runs it
    for task, _ in DEFAULT_TASKS:
        for check in ("builds", "deterministic", "causal", "recurrent", "state-size", "pruned-output", "fits"):
            assert f"{check}[{task}]" in passed, (check, task, passed)
    check_model(NAME, "index-lookup", {"N": 6}, positions="learned", mlp_width=8, **SMALL)  # the stack's fields


def test_a_step_form_that_disagrees_with_the_parallel_form_fails_the_contract(mingru):
    class NoisyStep(mingru.MinGRU):
        def step(self, x, state, t):
            y, state = super().step(x, state, t)
            return y + 1e-3 * torch.randn_like(y), state

    @dataclass(frozen=True)
    class NoisyConfig(mingru.MinGRUConfig):
        def mixer(self, layer: int) -> archsep.Mixer:
            return NoisyStep(self.width, self.expand)

    check_model(mingru.MinGRUConfig(**SMALL), "qstr", {"N": 6, "d": 4})  # the same config, honest: passes
    with pytest.raises(ArchsepError, match=r"check 'recurrent\[qstr\]' failed: the step form run over the "
                                           r"sequence differs from the parallel forward"):
        check_model(NoisyConfig(**SMALL), "qstr", {"N": 6, "d": 4})  # causal passes first: only step is wrong


def test_the_plugin_mixer_trains_through_the_engine(mingru):
    train = TrainConfig(batch_size=32, budget=32 * 40, eval_every=10, eval_size=200, threshold=0.05, lr=3e-3)
    r = train_run(RunConfig("index-lookup", NAME, {"N": 6}, SMALL, train, seed=0))
    assert r.status in ("ok", "censored"), r.error
    assert r.samples is not None and 0 < r.samples <= train.budget and r.curve and r.params > 0


def test_seeds_of_the_plugin_mixer_train_stacked_as_built_ins_do(mingru):
    """The engine trains runs of one shape as one vmapped model: the plugin's (its log-space scan
    included) gives each copy's own outputs and gradients."""
    spec = TaskSpec("tokens", 7, 7, 6, "last")
    models = []
    for seed in range(2):
        torch.manual_seed(seed)
        models.append(MODELS.build(NAME, **SMALL).build(spec))
    assert_stack_matches(models, [inputs(spec, seed=s) for s in range(2)])


def test_its_config_is_checked_like_a_built_in(mingru):
    for params, field in (({"expand": 0}, "expand"), ({"width": 0}, "width"), ({"positions": "rope"}, "positions"),
                          ({"heads": 2}, "heads")):
        with pytest.raises(ArchsepError, match=field):
            MODELS.build(NAME, **params)


def test_its_sweep_file_puts_it_beside_built_ins(mingru):
    from archsep.experiments import plan

    s = plan.load(SWEEP)
    by_arch: dict[str, set] = {}
    for c in s.configs:
        by_arch.setdefault(c.arch, set()).add(c.model_params.get("width"))
    assert set(by_arch) == {"tf-preln", "gla", "mamba2", NAME} and len(s.configs) == 24
    assert by_arch[NAME] and None not in by_arch[NAME]  # [match] chose its widths, as for the built-ins


def test_loading_the_plugin_leaves_nothing_registered():
    assert MODELS.known(NAME) is None
    with loaded():
        assert MODELS.known(NAME) is not None and NAME in plugins._MODULES
    assert MODELS.known(NAME) is None and NAME not in sys.modules and NAME not in plugins._MODULES
