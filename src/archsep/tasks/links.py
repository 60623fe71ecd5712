"""Link functions g for qSTR, each normalised so that predicting 0 has population MSE 1.

A link is built from the task seed and maps the q retrieved tokens (..., q, d) to a label (...).
Add one with `@LINKS.register("name")`.
"""
from __future__ import annotations

import math

import torch

from ..registry import Registry
from .base import Constant


class Link:
    def __init__(self, q: int, d: int, generator: torch.Generator, width: int = 32):
        self.q, self.d = q, d

    def __call__(self, xs: torch.Tensor) -> torch.Tensor:  # (..., q, d) -> (...)
        raise NotImplementedError

    def blind(self, x: torch.Tensor, tuples: torch.Tensor) -> torch.Tensor:
        """The mean label over index tuples drawn uniformly from `tuples` (M, q), for tokens x
        (n, N, d) -> (n,): the best prediction that ignores which tuple a position asks for."""
        out = []
        for chunk in x.split(max(1, 2_000_000 // max(1, tuples.shape[0] * tuples.shape[1] * x.shape[-1]))):
            out.append(self(chunk[:, tuples]).mean(-1))  # (c, M, q, d) -> (c, M) -> (c,)
        return torch.cat(out)


LINKS: Registry[Link] = Registry("link", plugins=True)


def _unit_rows(rows: int, d: int, generator: torch.Generator) -> torch.Tensor:
    u = torch.randn(rows, d, generator=generator)
    return u / u.norm(dim=1, keepdim=True)


@LINKS.register("linear")
class Linear(Link):
    """(1/sqrt q) sum_h <u_h, x_h>, u_h uniform on the sphere."""

    def __init__(self, q, d, generator, width=32):
        super().__init__(q, d, generator)
        self.u = _unit_rows(q, d, generator)
        self._u = Constant(self.u)  # on a GPU: copied there once

    def __call__(self, xs):
        return (xs * self._u.on(xs.device)).sum(dim=(-1, -2)) / math.sqrt(self.q)

    def blind(self, x, tuples):
        """A sum of one term per head: its mean over tuples is each head's mean over the
        positions (every index is uniform on [N], with or without repetition)."""
        z = x @ self._u.on(x.device).T  # (n, N, q): <u_h, x_j>
        return self.head(z).mean(1).sum(-1) / math.sqrt(self.q)

    def head(self, z: torch.Tensor) -> torch.Tensor:
        return z


@LINKS.register("hermite2")
class Hermite2(Linear):
    """(1/sqrt q) sum_h He2(<u_h, x_h>), He2(z) = (z^2 - 1)/sqrt 2."""

    def __call__(self, xs):
        z = (xs * self._u.on(xs.device)).sum(-1)
        return self.head(z).sum(-1) / math.sqrt(self.q)

    def head(self, z):
        return (z * z - 1) / math.sqrt(2)


@LINKS.register("norm2")
class Norm2(Link):
    """(1/sqrt(2 q d)) sum_h (|x_h|^2 - d): nonlinear in each token, so one head cannot serve two."""

    def __call__(self, xs):
        return ((xs * xs).sum(-1) - self.d).sum(-1) / math.sqrt(2 * self.q * self.d)


def _arccos_kernel(rho: torch.Tensor) -> torch.Tensor:
    """E[relu(z1) relu(z2)] for standard normals with correlation rho."""
    rho = rho.clamp(-1.0, 1.0)
    return (torch.sqrt(1 - rho * rho) + (math.pi - torch.arccos(rho)) * rho) / (2 * math.pi)


@LINKS.register("relu-teacher")
class ReluTeacher(Link):
    """A random two-layer ReLU net on the concatenated q tokens (paper B, Assumption 2),
    centred and scaled exactly with the arc-cosine kernel, so the label has mean 0, variance 1."""

    def __init__(self, q, d, generator, width=32):
        super().__init__(q, d, generator)
        self.w = _unit_rows(width, q * d, generator).double()
        self.a = (torch.randint(0, 2, (width,), generator=generator) * 2 - 1).double() / math.sqrt(width)
        mean = self.a.sum() / math.sqrt(2 * math.pi)
        second = self.a @ _arccos_kernel(self.w @ self.w.T) @ self.a
        self.mean, self.std = float(mean), float(torch.sqrt(second - mean * mean))
        self._w, self._a = Constant(self.w), Constant(self.a)  # on a GPU: copied there once

    def __call__(self, xs):
        v = xs.flatten(-2).to(torch.float64)
        h = torch.relu(v @ self._w.on(xs.device).T) @ self._a.on(xs.device)
        return ((h - self.mean) / self.std).to(xs.dtype)
