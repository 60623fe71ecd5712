"""Attention diagnostics: how much of a trained W_Q W_K^T lies in the block the theory predicts
(paper B, Eq. A.2 / Figure 2), and how close that block is to alpha * I."""
from __future__ import annotations

import math

import numpy as np
import torch


def block_mass(M: torch.Tensor, mask: torch.Tensor) -> float:
    """Fraction of the squared Frobenius mass of M (H, D, D) inside the predicted support."""
    M = M.detach().float()
    return float((M[mask] ** 2).sum() / (M ** 2).sum())


def block_cosine(M: torch.Tensor, mask: torch.Tensor) -> float:
    """Cosine similarity of each head's predicted block with alpha * I (sign-aware), averaged."""
    cos = []
    for h in range(mask.shape[0]):
        rows, cols = mask[h].any(1).nonzero().squeeze(1), mask[h].any(0).nonzero().squeeze(1)
        B = M[h].detach().float()[rows][:, cols]
        cos.append(float(torch.trace(B) / (B.norm() * math.sqrt(B.shape[0]) + 1e-30)))
    return float(np.mean(cos))

