"""nn.GRU / nn.LSTM / nn.RNN computed from plain tensor ops with the module's own parameters.

The fused library kernels cannot be vmapped; this version can, so the engine trains a stack of
K recurrent models as one batched computation. Inputs are batch-first (B, L, D).
"""
from __future__ import annotations

import torch
from torch import nn


def _cell(mode: str, gi: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None, w_hh, b_hh):
    """One step; gi = x W_ih^T + b_ih precomputed for the whole sequence."""
    gh = h @ w_hh.T + b_hh
    if mode == "GRU":  # gates r, z, n as in torch
        ir, iz, inn = gi.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        n = torch.tanh(inn + r * hn)
        return (1 - z) * n + z * h, None
    if mode == "LSTM":  # gates i, f, g, o
        assert c is not None  # an LSTM carries its cell state
        i, f, g, o = (gi + gh).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
    act = torch.relu if mode == "RNN_RELU" else torch.tanh
    return act(gi + gh), None


def plain_forward(mod: nn.RNNBase, x: torch.Tensor, hx=None) -> tuple[torch.Tensor, None]:
    """Same outputs as `mod(x)[0]` for a batch-first module without projections."""
    assert mod.batch_first and mod.proj_size == 0
    dirs = 2 if mod.bidirectional else 1
    H = mod.hidden_size
    out = x
    for layer in range(mod.num_layers):
        per_dir = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w_ih, w_hh = getattr(mod, "weight_ih" + sfx), getattr(mod, "weight_hh" + sfx)
            b_ih = getattr(mod, "bias_ih" + sfx) if mod.bias else 0
            b_hh = getattr(mod, "bias_hh" + sfx) if mod.bias else 0
            gi = out @ w_ih.T + b_ih  # all positions at once; only the h-recurrence is sequential
            h = out.new_zeros(out.shape[0], H)
            c = out.new_zeros(out.shape[0], H) if mod.mode == "LSTM" else None
            steps = range(out.shape[1] - 1, -1, -1) if d else range(out.shape[1])
            hs: list[torch.Tensor | None] = [None] * out.shape[1]
            for t in steps:
                h, c = _cell(mod.mode, gi[:, t], h, c, w_hh, b_hh)
                hs[t] = h
            per_dir.append(torch.stack([t for t in hs if t is not None], 1))  # every position was set
        out = torch.cat(per_dir, -1) if dirs == 2 else per_dir[0]
    return out, None
