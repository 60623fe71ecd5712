"""Trivial heuristics shared by the token tasks (mqar and mad-lab's tasks): what a model that
counts tokens, or copies the latest one of a kind, scores without solving the task."""
from __future__ import annotations

import torch


def token_mode(x: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """(B, L) token ids -> (B,) the most frequent id in [lo, hi) of each row (the smallest id on a
    tie; `lo` for a row without any)."""
    width = hi - lo
    inside = (x >= lo) & (x < hi)
    counts = torch.zeros(x.shape[0], width, dtype=torch.long, device=x.device)
    counts.scatter_add_(1, (x - lo).clamp(0, width - 1), inside.long())
    top = counts.amax(1, keepdim=True)
    ids = torch.arange(width, device=x.device).expand_as(counts)
    return torch.where(counts == top, ids, width).amin(1) + lo


def most_recent(x: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """(B, L) token ids -> (B, L): at each position t, the latest id in [lo, hi) at a position
    strictly before t (`lo` where there is none)."""
    B, L = x.shape
    inside = (x >= lo) & (x < hi)
    pos = torch.arange(L, device=x.device).expand(B, L)
    last = torch.where(inside, pos, -1).cummax(1).values  # the latest one at or before t
    before = torch.cat([torch.full((B, 1), -1, dtype=torch.long, device=x.device), last[:, :-1]], 1)
    return torch.where(before >= 0, x.gather(1, before.clamp(min=0)), lo)
