"""archsep: a laboratory for architecture separations.

Trains many small models on synthetic sequence tasks to measure when Transformers beat
feedforward and recurrent networks, in samples (how many training examples until the held-out
error drops below a threshold) and in size (how wide a model must be).

The data flows through: tasks -> models -> engine (the one training loop) -> runs (runner,
executors, the SQLite store, sweep files) -> analysis -> reporting; experiments/ holds one file
per figure, constructions/ the theory's hand-set weights.

    from archsep import RunConfig, TrainConfig, run_configs
    cfgs = [RunConfig("qstr", "tf-b", {"N": 8}, {"heads": 1}, TrainConfig(threshold=0.7), seed=s) for s in range(3)]
    results = run_configs(cfgs, out_dir="results/example")   # stored; a rerun reuses them

    df = load("results/example")                             # every stored run, a pandas DataFrame
    print(analyze("results/example")["fits"])                # alpha of samples ~ N^alpha, with its CI

Public names:
    RunConfig, TrainConfig          a run's typed config; its hash is the run's identity
    run_configs                     run configs into a store (local pool or Ray), reusing finished runs
    reproduce                       a registered figure (preset) end to end
    load, load_results, analyze     a store as a DataFrame / RunResults; fits and separations
    open_store                      the SQLite store itself
    TASKS, MODELS, EXPERIMENTS      registries: `@TASKS.register("name")` adds a task (see docs/extending.md)
    Task, ClassificationTask, TaskSpec, Batch, ModelConfig, SeqModel, Experiment
                                    what an extension subclasses and returns
    Mixer, MixerConfig, MixerStack  a token mixer alone, in the built-in mixers' pre-LN block stack
                                    (docs/extending.md, "A mixer only")
    RunResult, Claim, Summary, ArchsepError
    plugins, testing                loading extensions everywhere; checking them (check_task, check_model)
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("archsep")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

from .config import RunConfig, TrainConfig
from .errors import ArchsepError
from .experiments import EXPERIMENTS, Experiment
from .experiments.reproduce import reproduce
from .models import MODELS
from .results import Claim, RunResult, Summary
from .runs.runner import run_configs
from .store import open_store
from .analysis.analyze import analyze
from .reporting.tables import load, load_results
from .models.base import ModelConfig, SeqModel
from .models.mixers.stack import Mixer, MixerConfig, MixerStack
from .tasks import TASKS
from .tasks.base import Batch, ClassificationTask, Task, TaskSpec
from . import plugins

__all__ = ["ArchsepError", "Batch", "ClassificationTask", "Claim", "EXPERIMENTS", "Experiment", "MODELS",
           "Mixer", "MixerConfig", "MixerStack", "ModelConfig", "RunConfig",
           "RunResult", "SeqModel", "Summary", "TASKS", "Task", "TaskSpec", "TrainConfig", "__version__", "analyze",
           "load", "load_results", "open_store", "plugins", "reproduce", "run_configs"]
