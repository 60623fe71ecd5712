"""The CUDA path: what runs on a GPU when one is there; skipped cleanly without one (this
project's own machines have none; a lent H100 ran these on 2026-11-26, where the sync test
caught the loop copying qSTR's constants to the GPU at every step; after the fix all passed on a
lent H200 the same day: 25 passed, the one for machines without CUDA skipped)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from archsep import RunConfig, TrainConfig
from archsep.engine.train import train_many, train_run
from archsep.tasks import TASKS

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


def cfg(seed: int, device: str, **train) -> RunConfig:
    t = TrainConfig(**{"threshold": 0.7, "budget": 40_000, "eval_size": 500, "device": device, **train})
    return RunConfig("qstr", "tf-b", {"N": 4, "d": 4}, {"mlp_width": 32}, t, seed)


@cuda
def test_stacked_seeds_on_cuda_reach_the_samples_of_the_plain_path():
    plain = [train_run(cfg(s, "cuda", eval_mode="every")) for s in range(3)]
    fast = train_many([cfg(s, "cuda") for s in range(3)])
    for p, f in zip(plain, fast):
        assert p.status == f.status == "ok" and abs(p.samples - f.samples) <= p.resolution


@cuda
def test_cuda_and_cpu_agree_within_the_resolution():
    on_cpu = [train_run(cfg(s, "cpu")) for s in range(2)]
    on_gpu = [train_run(cfg(s, "cuda")) for s in range(2)]
    for c, g in zip(on_cpu, on_gpu):  # different kernels, so not bit-identical: close
        assert c.status == g.status == "ok"
        assert abs(c.samples - g.samples) <= 4 * c.resolution


@cuda
@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_reduced_precision_on_cuda_reaches_the_samples_of_fp32(precision):
    for s in range(2):
        full = train_run(cfg(s, "cuda", eval_mode="every"))
        fast = train_run(cfg(s, "cuda", eval_mode="every", precision=precision))
        assert full.status == fast.status == "ok"
        assert abs(full.samples - fast.samples) <= max(0.5 * full.samples, 4 * full.resolution)
    assert not torch.backends.cuda.matmul.allow_tf32  # the process's setting is restored


@cuda
def test_the_training_step_does_not_synchronise_with_the_host():
    """Between evaluations the loop queues work and never waits for the GPU: the host syncs that
    torch's sync debug mode reports do not grow with the number of steps (setting up a run, moving
    its model and held-out set to the GPU, and its final evaluation may sync; on a lent GPU the
    loop synced twice a step, copying qSTR's codes and link directions)."""
    import warnings

    def syncs(steps: int) -> int:
        c = cfg(0, "cuda", eval_every=10_000, budget=64 * steps, stop_at_threshold=False)
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as record:
                warnings.simplefilter("always")
                train_run(c)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        return sum("synchroniz" in str(w.message) for w in record)

    syncs(10)  # warm: the first run's one-time work
    assert syncs(150) == syncs(50)


@cuda
def test_a_preset_runs_on_cuda_from_the_command_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "archsep", "reproduce", "lookup-fig2", "--quick", "--device", "cuda",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    from archsep import load

    assert {str(d).split(":")[0] for d in load(tmp_path / "o").device} == {"cuda"}  # where each run trained


def test_fp32_on_cuda_keeps_tf32_out_of_cudnn_and_matmuls():
    """torch lets cuDNN (the RNNs' fused cells, convolutions) use TF32 by default: a run stored as
    fp32 must not train in TF32 on a GPU. The flags are process settings, so this runs anywhere."""
    from archsep.engine.train import matmul_precision

    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True  # torch's cuDNN default
    try:
        with matmul_precision("fp32", torch.device("cuda")):
            assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32  # restored
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        with matmul_precision("tf32", torch.device("cuda")):
            assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
        with matmul_precision("fp32", torch.device("cpu")):  # the CPU has no TF32: left as it is
            assert not torch.backends.cudnn.allow_tf32
        assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


@pytest.mark.parametrize("name", TASKS.names())
def test_after_its_first_batch_a_task_copies_nothing_to_the_device(name, monkeypatch):
    """A copy of a host tensor at every batch makes a GPU's training loop wait for the host at
    every step (qSTR's codes and link directions did, on a lent GPU: `Constant`). On the CPU such a
    copy is a no-op, so this counts the calls of Tensor.to that name a device, after the first batch."""
    task = TASKS.build(name)
    g = torch.Generator().manual_seed(0)
    task.sample(8, g)
    moves = []
    real = torch.Tensor.to

    def to(self, *args, **kwargs):
        if "device" in kwargs or any(isinstance(a, (torch.device, str, torch.Tensor)) for a in args):
            moves.append(args or kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", to)
    task.sample(8, g)
    assert not moves, f"{name}: {len(moves)} device copies a batch"


def test_the_default_workers_are_one_a_core_and_one_on_a_gpu(monkeypatch):
    """Processes sharing one GPU time-slice it: on an H100, 25 of them finished none of qstr-fig3's
    RNN runs in 500 s, where one process trains such a run in 100-130 s (on an H200). So a GPU gets one worker."""
    from archsep.runs.executors import cores, default_workers

    on = [cfg(0, "auto"), cfg(1, "auto")]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_workers(on) == cores() and default_workers([cfg(0, "cpu")]) == cores()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_workers(on) == 1 and default_workers([cfg(0, "cuda")]) == 1
    assert default_workers([cfg(0, "cpu")]) == cores()  # the runs' own device decides


def test_without_cuda_asking_for_it_is_one_line(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    p = subprocess.run([sys.executable, "-m", "archsep", "reproduce", "lookup-fig2", "--quick", "--device", "cuda",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "cuda" in p.stderr.lower()
    assert not (tmp_path / "o").exists()
