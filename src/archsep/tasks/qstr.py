"""q-Sparse Token Regression (paper B, SPEC 1.1).

    x_1..x_4 in R^d, position 3 asking for t_3 = (1,)  (q = 1, N = 4)  ->  label y_3 = g(x_1)

Every position i asks for g(x_{t_i1}, ..., x_{t_iq}); the indices t_i are written into the
prompt as positional codes, so a model must *retrieve* the tokens they point at.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal
from functools import cached_property

import torch

from ..errors import ArchsepError, check
from .base import Batch, Constant, Task, TaskSpec
from .links import LINKS, Link
from .registry import TASKS


def code_dim(N: int) -> int:
    """d_e = floor(5 ln N), at least 1."""
    return max(1, int(math.floor(5 * math.log(N))))


def distinct_codes(N: int, d_e: int, generator: torch.Generator) -> torch.Tensor:
    """N Rademacher codes in {+-1/sqrt(d_e)}^{d_e}, redrawn until pairwise distinct."""
    check(2**d_e >= N if d_e < 64 else True, "d_e", f"2^{d_e} codes cannot be {N} distinct ones")
    while True:
        codes = (torch.randint(0, 2, (N, d_e), generator=generator) * 2 - 1).float()
        if torch.unique(codes, dim=0).shape[0] == N:
            return codes / math.sqrt(d_e)


def draw_tuples(shape: tuple[int, ...], N: int, q: int, replace: bool, generator: torch.Generator) -> torch.Tensor:
    """Index tuples (*shape, q): uniform on [N]^q, or uniform over ordered q-tuples of distinct
    indices (the r-th free index is found by stepping past the ones already taken)."""
    dev = generator.device
    if replace:
        return torch.randint(0, N, (*shape, q), generator=generator, device=dev)
    picked: list[torch.Tensor] = []
    for h in range(q):
        v = torch.randint(0, N - h, shape, generator=generator, device=dev)
        for s in sorted_taken(picked):
            v = v + (v >= s).long()
        picked.append(v)
    return torch.stack(picked, dim=-1)


def sorted_taken(picked: list[torch.Tensor]) -> list[torch.Tensor]:
    if not picked:
        return []
    return list(torch.sort(torch.stack(picked, -1), dim=-1).values.unbind(-1))


@TASKS.register("qstr")
@dataclass(frozen=True)
class QSTR(Task):
    """qSTR / simple-qSTR.  Input at position i: [x_i, w_i, w_{t_i1}, ..., w_{t_iq}]."""

    N: int = 8
    q: int = 1
    d: int = 10
    link: str = "linear"
    simple: bool = False  # one tuple per prompt, shared by every position
    replace: bool = False  # draw tuples from [N]^q, as the paper states it
    code_scale: bool = False  # scale the code part by sqrt(d/q), the paper's prefactor
    teacher_width: int = 32  # width of the relu-teacher link
    # "prop3": the hard distribution of paper B's Proposition 3 (the few-heads floor): tokens
    # x_i = 0 in the second half (i >= N/2), whose positions all ask for t_i = (1, ..., q); the
    # first half's tuples are drawn from the first half, independent of x. Loss and metric are
    # read on the second half, where the floor 1 - H(q+d)/(qd) holds for H < q heads.
    distribution: Literal["iid", "prop3"] = "iid"
    seed: int = 0  # the task seed: link directions and positional codes

    kind = "regression"

    def __post_init__(self) -> None:
        check(self.N >= 1, "N", f"must be >= 1, got {self.N}")
        check(self.d >= 1, "d", f"must be >= 1, got {self.d}")
        check(self.q >= 1, "q", f"must be >= 1, got {self.q}")
        check(self.replace or self.q <= self.N, "q", f"must be <= N={self.N} without replacement, got {self.q}")
        check(self.teacher_width >= 1, "teacher_width", f"must be >= 1, got {self.teacher_width}")
        check(self.distribution in ("iid", "prop3"), "distribution",
              f"must be 'iid' or 'prop3', got {self.distribution!r}")
        if self.distribution == "prop3":
            check(self.q <= self.N // 2, "q", f"must be <= N/2 = {self.N // 2} for distribution 'prop3', got {self.q}")
            check(not self.simple, "simple", "must be false for distribution 'prop3'")
        LINKS.get(self.link)  # unknown link -> one-line error with the allowed names

    @cached_property
    def _hidden(self) -> tuple[Link, torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed)
        codes = distinct_codes(self.N, code_dim(self.N), g)
        link = LINKS.get(self.link)(self.q, self.d, g, width=self.teacher_width)
        return link, codes

    @property
    def g(self) -> Link:
        return self._hidden[0]

    @property
    def codes(self) -> torch.Tensor:
        return self._hidden[1]

    @cached_property
    def _codes(self) -> Constant:
        return Constant(self.codes)

    @property
    def d_e(self) -> int:
        return code_dim(self.N)

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("vector", self.d + (self.q + 1) * self.d_e, self.N, 1,
                        "mask" if self.distribution == "prop3" else "all", paper_ffn_width=self.N * self.d * self.q)

    def params(self) -> dict:
        d = super().params()
        if d["distribution"] == "iid":  # every run stored before the option existed: same identity
            del d["distribution"]
        return d

    def at_length(self, n: int) -> Task:
        """Not defined: the positional codes w_1..w_N are drawn from the task seed for N (their
        width too), so qSTR at another N is another task, not the same one at another length."""
        raise ArchsepError("qstr's positional codes are drawn for its N: at another N it is another task")

    def sample_as_published(self, n: int, generator: torch.Generator) -> Batch:
        """The authors' test protocol: held-out prompts drawn as simple-qSTR (one tuple shared by
        every position) whatever the training distribution (a bug of their 1STR runs)."""
        return dataclasses.replace(self, simple=True).sample(n, generator)

    @property
    def baseline(self) -> float:
        return 1.0

    def tuples(self) -> torch.Tensor:
        """Every index tuple a position can ask for (M, q), each equally likely: [N]^q, or the
        ordered tuples of distinct indices without repetition."""
        every = torch.cartesian_prod(*[torch.arange(self.N)] * self.q).reshape(-1, self.q)
        if self.replace:
            return every
        equal = (every[:, :, None] == every[:, None, :]).sum((1, 2))  # q where every index is distinct
        return every[equal == self.q]

    def pointer_blind_mse(self, n: int, generator: torch.Generator) -> float:
        """Test MSE on `n` prompts of the best predictor that ignores the index tuples: E[y_i | x]
        = the mean of g over every tuple (`Link.blind`), the same at every position (the tuples
        are drawn independently of the tokens). A threshold above it is met without retrieval."""
        check(self.distribution == "iid", "distribution", "the pointer-blind predictor is defined for 'iid'")
        b = self.sample(n, generator)
        x = b.x[..., :self.d]  # (n, N, d): the tokens, without the codes
        pred = self.g.blind(x, self.tuples())  # (n,)
        return float(((b.y - pred[:, None]) ** 2).mean())

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        dev = generator.device
        x = torch.randn(n, self.N, self.d, generator=generator, device=dev)
        if self.distribution == "prop3":
            return self._prop3(x, generator)
        shape = (n, 1) if self.simple else (n, self.N)
        t = draw_tuples(shape, self.N, self.q, self.replace, generator).expand(n, self.N, self.q)
        return self.assemble(x, t)

    def _prop3(self, x: torch.Tensor, generator: torch.Generator) -> Batch:
        n, half = x.shape[0], self.N // 2
        x[:, half:] = 0
        t = torch.empty(n, self.N, self.q, dtype=torch.long, device=x.device)
        t[:, :half] = draw_tuples((n, half), half, self.q, self.replace, generator)
        t[:, half:] = torch.arange(self.q, device=x.device)
        b = self.assemble(x, t)
        b.mask = torch.zeros(n, self.N, dtype=torch.bool, device=x.device)
        b.mask[:, half:] = True
        return b

    def assemble(self, x: torch.Tensor, t: torch.Tensor) -> Batch:
        """The batch for tokens x (n, N, d) and index tuples t (n, N, q)."""
        n = x.shape[0]
        codes = self._codes.on(x.device)
        retrieved = torch.gather(x.unsqueeze(1).expand(n, self.N, self.N, self.d), 2,
                                 t.unsqueeze(-1).expand(n, self.N, self.q, self.d))
        y = self.g(retrieved)
        pointer_codes = codes[t].flatten(-2)  # (n, N, q*d_e)
        own = codes.expand(n, self.N, self.d_e)
        scale = math.sqrt(self.d / self.q) if self.code_scale else 1.0
        z = torch.cat([x, scale * own, scale * pointer_codes], dim=-1)
        return Batch(z, y, tuples=t)
