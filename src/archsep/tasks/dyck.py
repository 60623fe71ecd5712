"""Bounded Dyck-(2,2) recognition (paper A, SPEC 1.3).

    x = [ [ ] ] [ ( ) ]   (ids 2 2 3 3 2 0 1 3, N = 8)  ->  label 1 (well nested, depth <= 2)

Strings of even length N over `( ) [ ]` (token ids 0 1 2 3: id = 2*type + is_close), label 1
iff the string is a well-nested bracket string of nesting depth <= 2. Labels are i.i.d. fair
coins, so the chance accuracy is 1/2 and the best constant predictor's error is 0.5.

Positives: a random walk (depth 2 -> the matching close; depth 0 -> `(` or `[` uniformly;
depth 1 -> uniform over `(`, `[` and the matching close) for N-2 steps; the depth is then even
(0 or 2) and the last two symbols close what is open (depth 2) or add a uniform depth-1 pair.
Negatives: a fresh positive with c ~ U{1..max(1, N//10)} distinct positions corrupted (each,
with probability 1/2, swaps the bracket type or flips open/close); a corrupted string that is
still in the language is thrown away and the example redrawn.

The oracle is a DFA whose live states are the 7 stacks of depth <= 2 (the SPEC's "7-state
DFA"), plus one absorbing reject state.

Trivial baselines (`trivial_baselines`): besides the constant (1/2), the type-blind
"depth-counter": accept iff the depth (opens minus closes) never goes below 0 nor above 2 and
ends at 0, ignoring bracket types. Most corruptions change the depth profile, so it scores far
above 1/2 (about 90% at N = 50, 95% at N = 100, 97% at N = 200) and rises with N. Only a
negative whose corruptions are all type swaps fools it: `sample_type_swaps` draws exactly those
(positives with c ~ U{1..max(1, N//10)} brackets' types swapped, kept only when not in the
language), on which the depth counter scores 0% by construction, so a model's accuracy there
shows whether it knows bracket types.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check
from .base import Batch, ClassificationTask, Constant, TaskSpec
from .registry import TASKS

SYMBOLS = "()[]"  # id = 2 * type + is_close
MAX_DEPTH = 2


def _build_dfa() -> tuple[list[tuple[int, ...]], torch.Tensor]:
    """States: stacks of bracket types (tuples, bottom first) of depth <= 2, then REJECT."""
    stacks: list[tuple[int, ...]] = [()]
    for depth in range(1, MAX_DEPTH + 1):
        stacks += [s + (t,) for s in stacks if len(s) == depth - 1 for t in (0, 1)]
    index = {s: i for i, s in enumerate(stacks)}
    reject = len(stacks)
    table = torch.full((reject + 1, 4), reject, dtype=torch.long)
    for s, i in index.items():
        for sym in range(4):
            typ, close = divmod(sym, 2)
            if close:
                if s and s[-1] == typ:
                    table[i, sym] = index[s[:-1]]
            elif len(s) < MAX_DEPTH:
                table[i, sym] = index[s + (typ,)]
    return stacks, table


DFA_STACKS, DFA_TABLE = _build_dfa()
_TABLE = Constant(DFA_TABLE)
REJECT = len(DFA_STACKS)  # 7
ACCEPT = 0  # the empty stack


def dfa_accepts(x: torch.Tensor) -> torch.Tensor:
    """(..., L) token ids -> (...) bool: membership in bounded Dyck-(2,2), by the DFA, one
    position at a time (the reference `dyck_accepts` is tested against)."""
    table = _TABLE.on(x.device)
    state = torch.zeros(x.shape[:-1], dtype=torch.long, device=x.device)
    for i in range(x.shape[-1]):
        state = table[state, x[..., i].long()]
    return state == ACCEPT


def dyck_accepts(x: torch.Tensor) -> torch.Tensor:
    """(..., L) token ids -> (...) bool: membership in bounded Dyck-(2,2), all positions at once.
    The depth profile stays in [0, 2] and ends at 0 (`depth_counter_accepts`), and every close
    has its open's type: the open it closes is the latest open before it that started at the
    depth the close returns to (between the two the depth stays above it)."""
    x = x.long()
    if x.shape[-1] == 0:  # the empty word is in the language
        return torch.ones(x.shape[:-1], dtype=torch.bool, device=x.device)
    typ, is_close = x // 2, x % 2
    after = (1 - 2 * is_close).cumsum(-1)                    # depth after each position
    before = after - 1 + 2 * is_close                        # depth before it
    pos = torch.arange(x.shape[-1], device=x.device).expand_as(x)
    ok = depth_counter_accepts(x)
    for level in range(MAX_DEPTH):                           # closes returning to depth `level`
        opens = (is_close == 0) & (before == level)
        last = torch.where(opens, pos, -1).cummax(-1).values  # latest such open at or before each position
        closes = (is_close == 1) & (after == level)
        partner = typ.gather(-1, last.clamp_min(0))
        ok &= ~(closes & ((last < 0) | (partner != typ))).any(-1)
    return ok


def depth_counter_accepts(x: torch.Tensor, max_depth: int | None = MAX_DEPTH) -> torch.Tensor:
    """(..., L) token ids -> (...) bool: the type-blind depth counter. Accept iff the running
    depth (+1 per open, -1 per close, bracket types ignored) never drops below 0, never exceeds
    `max_depth` (None: unbounded) and ends at 0."""
    depth = (1 - 2 * (x.long() % 2)).cumsum(-1)
    ok = (depth.amin(-1) >= 0) & (depth[..., -1] == 0)
    if max_depth is not None:
        ok &= depth.amax(-1) <= max_depth
    return ok


@TASKS.register("dyck")
@dataclass(frozen=True)
class Dyck(ClassificationTask):
    N: int = 100  # string length, even
    seed: int = 0  # unused: the task has no hidden randomness

    def __post_init__(self) -> None:
        check(self.N >= 2 and self.N % 2 == 0, "N", f"must be an even integer >= 2, got {self.N}")

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", 4, self.N, 2, "last")

    @property
    def chance_accuracy(self) -> float:
        return 0.5

    @property
    def max_corruptions(self) -> int:
        return max(1, self.N // 10)

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        dev = generator.device
        y = torch.randint(0, 2, (n,), generator=generator, device=dev)
        x = self.positives(n, generator)
        neg = (y == 0).nonzero().squeeze(1)
        if len(neg):
            x[neg] = self.negatives(len(neg), generator)
        return Batch(x, y)

    def positives(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """The random walk of the module docstring, all positions at once. Every step changes the
        depth by one, so before an odd step it is 1 and before an even one 0 or 2: 0 at step 0,
        then 0 exactly when the odd step before closed. A close at an even step (depth 2) closes
        the type opened at the step before; a close at an odd step (depth 1) the type opened at
        the latest even step from depth 0. The uniforms are drawn one step at a time, as the
        walk reads them, then the last pair's type (`positives_by_step` is the same walk written
        step by step, and draws the same numbers)."""
        dev = generator.device
        N, S = self.N, self.N - 2
        x = torch.empty(n, N, dtype=torch.long, device=dev)
        u = torch.stack([torch.rand(n, generator=generator, device=dev) for _ in range(S)]) if S else None  # (S, n)
        t = torch.randint(0, 2, (n,), generator=generator, device=dev)
        if u is None:  # N = 2: one uniform pair
            x[:, 0], x[:, 1] = 2 * t, 2 * t + 1
            return x
        ev, od = u[0::2], u[1::2]                             # (S/2, n) each: steps 0, 2, ... and 1, 3, ...
        od_close, od_type = od >= 2 / 3, (od >= 1 / 3).long()  # depth 1: thirds ('(', '[', close)
        ev_open = torch.ones_like(od_close)
        ev_open[1:] = od_close[:-1]                           # depth 0 before an even step, else 2
        ev_type = (ev >= 0.5).long()
        prev_od_type = torch.cat([od_type[:1], od_type[:-1]])  # the type the odd step before opened
        x[:, 0:S:2] = torch.where(ev_open, 2 * ev_type, 2 * prev_od_type + 1).T
        k = torch.arange(S // 2, device=dev)[:, None]
        last_open = torch.where(ev_open, k, -1).cummax(0).values  # latest even step from depth 0 (step 0 is one)
        bottom = ev_type.gather(0, last_open)                 # the type open at depth 1, at each odd step
        x[:, 1:S:2] = torch.where(od_close, 2 * bottom + 1, 2 * od_type).T
        at2 = ~od_close[-1]                                   # depth after the walk: 2 unless its last step closed
        x[:, N - 2] = torch.where(at2, 2 * od_type[-1] + 1, 2 * t)
        x[:, N - 1] = torch.where(at2, 2 * bottom[-1] + 1, 2 * t + 1)
        return x

    def positives_by_step(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """`positives` written one step at a time with an explicit stack (the reference it is
        tested against)."""
        dev = generator.device
        N = self.N
        x = torch.empty(n, N, dtype=torch.long, device=dev)
        depth = torch.zeros(n, dtype=torch.long, device=dev)
        stack = torch.zeros(n, MAX_DEPTH + 1, dtype=torch.long, device=dev)  # stack[:, d] = type at depth d
        rows = torch.arange(n, device=dev)
        for i in range(N - 2):
            u = torch.rand(n, generator=generator, device=dev)
            # depth 0: open a uniform type; depth 1: thirds (open '(', open '[', close); depth 2: close
            close = (depth == 2) | ((depth == 1) & (u >= 2 / 3))
            open_type = torch.where(depth == 0, (u >= 0.5).long(), (u >= 1 / 3).long())
            top = stack[rows, depth]
            tok = torch.where(close, 2 * top + 1, 2 * open_type)
            x[:, i] = tok
            new_depth = torch.where(close, depth - 1, depth + 1)
            stack[rows, new_depth] = torch.where(close, stack[rows, new_depth], open_type)
            depth = new_depth
        # depth is now 0 or 2 (even number of steps)
        t = torch.randint(0, 2, (n,), generator=generator, device=dev)
        at2 = depth == 2
        x[:, N - 2] = torch.where(at2, 2 * stack[:, 2] + 1, 2 * t)
        x[:, N - 1] = torch.where(at2, 2 * stack[:, 1] + 1, 2 * t + 1)
        return x

    def corrupt(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """c ~ U{1..max(1, N//10)} distinct positions, each: swap type (xor 2) or flip
        open/close (xor 1), with probability 1/2."""
        dev = generator.device
        n, N = x.shape
        c = torch.randint(1, self.max_corruptions + 1, (n, 1), generator=generator, device=dev)
        ranks = torch.rand(n, N, generator=generator, device=dev).argsort(1).argsort(1)
        hit = ranks < c  # c distinct uniform positions per row
        op = torch.where(torch.rand(n, N, generator=generator, device=dev) < 0.5, 2, 1)
        return torch.where(hit, x ^ op, x)

    def extra_tests(self, n: int, generator: torch.Generator) -> dict[str, Batch]:
        """"type-swaps": accuracy on them says whether a model reads bracket types at all (a
        type-blind depth counter scores 0% there and 95% on the ordinary test set at N = 100)."""
        return {"type-swaps": self.sample_type_swaps(n, generator)}

    def sample_type_swaps(self, n: int, generator: torch.Generator) -> Batch:
        """n depth-preserving negatives (label 0): positives with c ~ U{1..max(1, N//10)}
        distinct brackets' types swapped (xor 2, open/close kept), redrawn while still in the
        language (when every swapped bracket's partner was swapped too). Their depth profile is
        a positive's, so the type-blind depth counter accepts each one. Not part of `sample`'s
        stream: a separate test set, for accuracy on type mismatches alone."""
        return Batch(self._type_swaps(n, generator), torch.zeros(n, dtype=torch.long, device=generator.device))

    def _type_swaps(self, n: int, generator: torch.Generator) -> torch.Tensor:
        dev = generator.device
        x = self.positives(n, generator)
        c = torch.randint(1, self.max_corruptions + 1, (n, 1), generator=generator, device=dev)
        ranks = torch.rand(n, self.N, generator=generator, device=dev).argsort(1).argsort(1)
        x = torch.where(ranks < c, x ^ 2, x)
        bad = dyck_accepts(x).nonzero().squeeze(1)
        if len(bad):
            x[bad] = self._type_swaps(len(bad), generator)
        return x

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy on n `sample_test` examples of "constant" (the most frequent label) and
        "depth-counter" (`depth_counter_accepts`: type-blind, within the depth bound 2)."""
        b = self.sample_test(n, generator)
        return {"constant": self.constant_accuracy(b),
                "depth-counter": self.label_accuracy(depth_counter_accepts(b.x).long(), b)}

    def negatives(self, n: int, generator: torch.Generator) -> torch.Tensor:
        x = self.corrupt(self.positives(n, generator), generator)
        bad = dyck_accepts(x).nonzero().squeeze(1)  # still in the language: redraw those
        if len(bad):
            x[bad] = self.negatives(len(bad), generator)
        return x


def brute_force_member(s: str) -> bool:
    """Independent reference: reduce adjacent matched pairs to nothing, and never exceed depth 2."""
    depth = 0
    for ch in s:
        depth += 1 if ch in "([" else -1
        if depth < 0 or depth > MAX_DEPTH:
            return False
    prev = None
    while prev != s:
        prev, s = s, s.replace("()", "").replace("[]", "")
    return s == ""


def decode(x: torch.Tensor) -> str:
    return "".join(SYMBOLS[int(t)] for t in x)
