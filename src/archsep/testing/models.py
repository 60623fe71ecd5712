"""The model checks of `check_model` (listed in the docstring of `archsep.testing`); the
recurrent ones, for models with a step form, are in `recurrent`."""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch

from ..models.base import ModelConfig, SeqModel
from ..registry import from_params
from ..tasks.base import Task, TaskSpec
from .common import SEEDS, _Checks, _close, _gen, _require
from .recurrent import recurrent_checks

FIT_N, FIT_STEPS, FIT_LR, FIT_RATIO = 64, 300, 3e-3, 0.5


def _build(cfg: ModelConfig, spec: TaskSpec, seed: int = 0) -> SeqModel:
    torch.manual_seed(seed)
    return cfg.build(spec)


def model_checks(c: _Checks, tname: str, mname: str, resolve: Callable[[TaskSpec], ModelConfig],
                 task: Task, only_recurrent: bool = False) -> None:
    """Run the model checks in order on the config `resolve(task.spec)` gives (inside 'builds');
    with `only_recurrent`, 'builds' and the recurrent checks alone."""
    spec = task.spec
    check = lambda n: c.check(f"{n}[{tname}]")  # noqa: E731
    with check("builds"):
        cfg = resolve(spec)
        _require(dataclasses.is_dataclass(cfg) and type(cfg).__dataclass_params__.frozen,
                 "a model config must be a frozen dataclass (its fields are its identity)")
        again = from_params(type(cfg), cfg.params(), f"arch '{mname}'")
        _require(again == cfg, f"from_params(params()) gave {again!r}, not {cfg!r}")
        net = _build(cfg, spec)
        _require(isinstance(net, SeqModel), f"build returned a {type(net).__name__}, not a SeqModel")
    batch = task.sample_test(8, _gen(SEEDS[0]))
    x = batch.x
    if only_recurrent:
        recurrent_checks(check, net, x, spec)
        return
    B, L, C = x.shape[0], x.shape[1], spec.output_dim
    with check("output-shape"):
        net.eval()
        with torch.no_grad():
            out = net(x)
        _require(isinstance(out, torch.Tensor), f"forward returned {type(out).__name__}, not a tensor")
        # a model may predict only what a readout-'last' task reads: (B, 1, C)
        last_only = spec.readout == "last" and tuple(out.shape) == (B, 1, C)
        _require(tuple(out.shape) == (B, L, C) or last_only,
                 f"output {tuple(out.shape)}, expected (B, L, output_dim)={(B, L, C)}"
                 + (f" or {(B, 1, C)} (readout 'last')" if spec.readout == "last" else ""))
        _require(out.dtype == torch.float32, f"output dtype {out.dtype}, expected float32")
    with check("finite-output"):
        bad = int((~torch.isfinite(out)).sum())
        _require(bad == 0, f"{bad} of {out.numel()} outputs are NaN or inf")
    with check("deterministic"):
        twin = _build(cfg, spec)
        sa, sb = net.state_dict(), twin.state_dict()
        _require(sa.keys() == sb.keys(), "two builds have different parameter names")
        diff = [k for k in sa if not torch.equal(sa[k], sb[k])]
        _require(not diff, f"two builds under torch.manual_seed(0) differ in {', '.join(diff[:3])}")
        twin.eval()
        with torch.no_grad():
            _require(torch.equal(net(x), out), "two forward passes on the same input differ")
            _require(torch.equal(twin(x), out), "two builds under the same seed give different outputs")
    if L >= 2 and not task.fixed_shapes:  # only tasks with variable lengths feed shorter inputs
        with check("shorter-input"):
            with torch.no_grad():
                short = net(x[:, :-1])
            want = (B, 1, C) if last_only else (B, L - 1, C)
            _require(tuple(short.shape) == want,
                     f"input of length {L - 1} < seq_len gave output {tuple(short.shape)}, expected {want}")
            _require(bool(torch.isfinite(short).all()), "output on a shorter input is not finite")
    with check("batch-independent"):
        with torch.no_grad():
            part = net(x[:2])
        _require(_close(part, out[:2]), "the outputs of two examples change when the rest of the batch is removed")
    recurrent_checks(check, net, x, spec)  # on a float64 copy, before pruning
    with check("pruned-output"):
        net.prune_to_readout()
        with torch.no_grad():
            pruned = net(x)
        shape = tuple(pruned.shape)
        if spec.readout == "last":
            _require(shape in ((B, L, C), (B, 1, C), (B, C)),
                     f"pruned output {shape}, expected {(B, L, C)}, {(B, 1, C)} or {(B, C)} for readout 'last'")
            last = pruned[:, -1] if pruned.dim() == 3 else pruned
            _require(_close(last, out[:, -1]), "the pruned output at the last position differs from the full output")
        else:
            _require(shape == (B, L, C), f"pruned output {shape}, expected {(B, L, C)} for readout '{spec.readout}'")
            _require(_close(pruned, out), "the pruned output differs from the full output")
        lp, lf = float(task.loss(pruned, batch)), float(task.loss(out, batch))
        _require(math.isclose(lp, lf, rel_tol=1e-4, abs_tol=1e-5), f"the loss of the pruned output {lp} != {lf}")
    with check("gradients"):
        net.train()
        net.zero_grad(set_to_none=True)
        task.loss(net(x), batch).backward()
        named = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
        _require(bool(named), "the model has no trainable parameters")
        missing = [n for n, p in named if p.grad is None]
        _require(not missing, f"no gradient reaches {', '.join(missing[:3])}")
        grads = [(n, p.grad) for n, p in named if p.grad is not None]  # every one, checked above
        nonfinite = [n for n, g in grads if not bool(torch.isfinite(g).all())]
        _require(not nonfinite, f"non-finite gradient in {', '.join(nonfinite[:3])}")
        _require(any(bool(g.abs().sum() > 0) for _, g in grads), "every gradient is zero")
    with check("fits"):
        _fit(net, task)


def _fit(net: SeqModel, task: Task) -> None:
    """Full-batch Adam on FIT_N fixed examples until the loss or the metric (the error rate, for
    classification) is below FIT_RATIO of its start; at most FIT_STEPS steps."""
    b = task.sample(FIT_N, _gen(SEEDS[0]))
    opt = torch.optim.Adam(net.parameters(), lr=FIT_LR)
    net.train()
    first, best = (math.nan, math.nan), [math.inf, math.inf]
    for step in range(FIT_STEPS + 1):
        pred = net(b.x)
        loss = task.loss(pred, b)
        v = (float(loss.detach()), float(task.metric(pred.detach(), b)))
        _require(math.isfinite(v[0]), f"the training loss became {v[0]} at step {step}")
        if step == 0:
            first = v
        best = [min(best[0], v[0]), min(best[1], v[1])]
        if any(bi < FIT_RATIO * fi for bi, fi in zip(best, first)) or step == FIT_STEPS:
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _require(any(bi < FIT_RATIO * fi for bi, fi in zip(best, first)),
             f"training on {FIT_N} fixed examples (Adam, lr {FIT_LR}, {FIT_STEPS} steps) brought the loss from "
             f"{first[0]:.4g} only to {best[0]:.4g} and the metric from {first[1]:.4g} to {best[1]:.4g} "
             f"(needs one below {FIT_RATIO:g} of its start)")
