"""Stack manipulation (Delétang et al. 2023, deterministic context-free): an initial stack, then
push/pop operations; output the final stack.

    x = 0 1 1 PUSH1 POP POP SEP _ _ _ _ _ _ _   (ids 0 1 1 4 2 2 5 6 6 6 6 6 6 6, N = 6)  ->  targets 1 0 2 (1 0 END)

(0 1 1, then PUSH1 -> 0 1 1 1, POP -> 0 1 1, POP -> 0 1: read top down, 1 0, then END, at the
first three _ positions; the other four carry no target.)

Input of length k (k = N at test time): an initial stack of s ~ U{1..k-1} uniform bits (token
ids 0 and 1, given bottom to top; s = 1 when k = 1), then k - s operations uniform over POP,
PUSH 0, PUSH 1 (ids 2, 3, 4); a POP on an empty stack does nothing. Then SEP (id 5) and k + 1
BLANK tokens (id 6): length 2k + 2. Targets (3 classes): the final stack read top to bottom,
then END (class 2), at the first BLANK positions (readout 'mask'); the BLANK positions after
END carry no target (mask false: the stack's length varies, the tensor does not). At most
k + 1 targets (k pushes, then END).

Chance accuracy, per target symbol pooled over the batch as the metric pools it: every stack
symbol is a fair bit whatever the stack's length (initial and pushed bits are uniform, and a
POP does not look at what it removes), and each example has one END, so with E = E[final
length] (exact: `expected_length`) the best constant scores max(E/2, 1) / (E + 1): a bit when
E >= 2: 0.4353 at N = 10 (E = 6.72), 0.4819 at N = 40 (E = 26.69), 0.4926 at N = 100;
END only for N <= 2.

Trivial baselines (`trivial_baselines`, on `sample_test` at length N): the constant, and
"input-majority": the more frequent of the bits the input pushes (initial stack and PUSH
operations; 0 on a tie) at every target position, never END, which a bag-of-tokens model
computes; the final stack is made of those bits, so it beats the constant: 55.1% at N = 10,
54.7% at N = 40, 53.5% at N = 100 (measured on 20000 examples; the constant 43.5 / 48.2 / 49.3%).

Lengths: `train_lengths`, `min_length`, `sample_length(n, k, generator)` for other lengths:
see `archsep.tasks.formal`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import torch

from .base import Batch, TaskSpec
from .formal import FormalTask, bit_majority, seq2seq_batch
from .registry import TASKS

POP, PUSH0, PUSH1, SEP, BLANK = 2, 3, 4, 5, 6
END = 2  # the target class after the last stack symbol
NAMES = {0: "0", 1: "1", POP: "POP", PUSH0: "PUSH0", PUSH1: "PUSH1", SEP: "SEP", BLANK: "_"}


@functools.lru_cache(maxsize=None)
def expected_length(k: int) -> float:
    """E[length of the final stack] for inputs of length k: initial length s ~ U{1..k-1}
    (1 for k = 1), then k - s operations, each a POP (length - 1, not below 0) with probability
    1/3 or a PUSH (length + 1) with probability 2/3. Exact up to rounding, in O(k^2): g_t(l), the
    expected final length after t operations from length l, obeys g_0(l) = l and
    g_{t+1}(l) = g_t(max(l - 1, 0)) / 3 + 2 g_t(l + 1) / 3, and is needed where l + t = k."""
    if k == 1:
        return 1.0
    g = [float(length) for length in range(k + 1)]  # g_0 on 0..k; g_t stays exact on l <= k - t
    total = 0.0
    for t in range(1, k):  # g_t, then the initial length s = k - t
        g = [g[max(length - 1, 0)] / 3 + 2 * g[length + 1] / 3 for length in range(k - t + 1)]
        total += g[k - t]
    return total / (k - 1)


def pushed_bits(inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, k) inputs -> the bit each position pushes (n, k), and where it pushes one (n, k)
    bool: an initial stack symbol pushes itself, PUSH 0 / PUSH 1 their bit, POP nothing."""
    bits = torch.where(inputs < 2, inputs, inputs - PUSH0).clamp(0, 1)
    return bits, inputs != POP


@TASKS.register("stack-manipulation")
@dataclass(frozen=True)
class StackManipulation(FormalTask):
    N: int = 40  # test input length (initial stack + operations); the longest training length
    train_lengths: Literal["variable", "fixed"] = "variable"
    min_length: int = 1  # shortest training length when variable (clipped to N)
    seed: int = 0  # unused: the task has no hidden randomness

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", 7, 2 * self.N + 2, 3, "mask")

    @property
    def chance_accuracy(self) -> float:
        e = expected_length(self.N)
        return max(e / 2, 1.0) / (e + 1)

    def draw_inputs(self, n: int, k: int, generator: torch.Generator) -> torch.Tensor:
        dev = generator.device
        s = torch.randint(1, max(2, k), (n, 1), generator=generator, device=dev)  # initial stack length
        bits = torch.randint(0, 2, (n, k), generator=generator, device=dev)
        ops = torch.randint(POP, PUSH1 + 1, (n, k), generator=generator, device=dev)
        return torch.where(torch.arange(k, device=dev) < s, bits, ops)

    def final_stacks(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(n, k) inputs -> the final stacks (n, k), bottom first, and their lengths (n,)."""
        n, k = inputs.shape
        stack = torch.zeros(n, k, dtype=torch.long, device=inputs.device)
        length = torch.zeros(n, dtype=torch.long, device=inputs.device)
        rows = torch.arange(n, device=inputs.device)
        bits, push = pushed_bits(inputs)
        for i in range(k):  # before step i at most i symbols are on the stack
            top = length.clamp(max=k - 1)
            stack[rows, top] = torch.where(push[:, i], bits[:, i], stack[rows, top])
            length = torch.where(push[:, i], length + 1, (length - 1).clamp(min=0))
        return stack, length

    def encode(self, inputs: torch.Tensor) -> Batch:
        n, k = inputs.shape
        stack, length = self.final_stacks(inputs)
        j = torch.arange(k + 1, device=inputs.device).unsqueeze(0)  # output position
        below = (length.unsqueeze(1) - 1 - j).clamp(0, k - 1)  # the stack index read top-down
        targets = torch.where(j < length.unsqueeze(1), stack.gather(1, below),
                              torch.where(j == length.unsqueeze(1), END, 0))
        return seq2seq_batch(inputs, targets, SEP, BLANK, target_mask=j <= length.unsqueeze(1))

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy per target symbol on n `sample_test` examples of "constant" (the most
        frequent target) and "input-majority" (see the module doc)."""
        b = self.sample_test(n, generator)
        k = self.N
        bits, push = pushed_bits(b.x[:, :k])
        pad = torch.zeros(n, k + 1, dtype=torch.long, device=b.x.device)
        majority = torch.cat([pad, bit_majority(bits, push).unsqueeze(1).expand(n, k + 1)], dim=1)
        return {"constant": self.constant_accuracy(b),
                "input-majority": self.label_accuracy(majority, b)}


def decode(x: torch.Tensor) -> str:
    return " ".join(NAMES[int(t)] for t in x)
