"""archsep: a laboratory for architecture separations.

Trains many small models on synthetic sequence tasks to measure when Transformers beat
feedforward and recurrent networks, in samples (how many training examples until the held-out
error drops below a threshold) and in size (how wide a model must be).

The data flows through: tasks -> models -> engine (the one training loop) -> runs (runner,
executors, the SQLite store, sweep files) -> analysis -> reporting; experiments/ holds one file
per figure, constructions/ the theory's hand-set weights.

    from archsep import RunConfig, TrainConfig, run_configs
    cfgs = [RunConfig("qstr", "tf", {"N": 8}, {"heads": 1}, TrainConfig(threshold=0.7), seed=s) for s in range(3)]
    results = run_configs(cfgs, out_dir="results/example")   # stored; a rerun reuses them

Public names: RunConfig, TrainConfig, RunResult, Claim, Summary, run_configs, reproduce,
open_store, TASKS, MODELS, EXPERIMENTS, Experiment, ArchsepError.
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
from .runs.store import open_store
from .tasks import TASKS

__all__ = ["ArchsepError", "Claim", "EXPERIMENTS", "Experiment", "MODELS", "RunConfig", "RunResult", "Summary",
           "TASKS", "TrainConfig", "__version__", "open_store", "reproduce", "run_configs"]
