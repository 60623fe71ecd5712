"""Bounded Dyck-(2,2) with a constant-size ReLU RNN: the 7-state DFA encoded in hand-set
weights of the project's `rnn` model (cell 'relu', unidirectional, one-hot embedding).

Hidden units: one per *defined* DFA transition (state j, symbol a) -- 12 of them -- plus a
clock unit that is 0 before the first symbol and 1 after. After every step exactly one
transition unit is on (the last transition taken) or none (the string has left the language:
the dead state), so the hidden vector is one-hot over transitions. The indicator of the
current state j is affine in h:
    I_j(h) = sum_{units v whose transition ends in j} h_v   (+ 1 - clock, for the empty stack,
                                                             which is the state before symbol 1)
and unit (j, a) = ReLU(I_j(h) + x_a - 1) is the AND of "in state j" and "reading a". Every
quantity is an integer, so the float computation is exact. Readout: accept iff I_empty = 1.

Verification (all of it through the real nn.RNN):
- proof: breadth-first search over the hidden vectors reachable from h_0 = 0; each is binary,
  decodes to one DFA state, and every symbol takes it to the vector of the DFA's next state.
  The reachable set is finite, so by induction the RNN equals the DFA on strings of every
  length -- in particular on all 4^16 strings of length 16;
- exhaustive runs over all 4^L strings for L <= 10 (the string reference `brute_force_member`
  for L <= 8), and path counting through the reachable hidden vectors for L <= 16 (the
  positives of even length L number exactly 2^(L-1));
- the task's balanced strings, and uniform strings, at N = 10^4.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch

from ..models.rnn import RNN, RNNConfig
from ..tasks.dyck import ACCEPT, DFA_TABLE, REJECT, Dyck, brute_force_member, decode, dyck_accepts
from .base import CONSTRUCTIONS, Construction

TRANSITIONS = [(j, a) for j in range(REJECT) for a in range(4) if int(DFA_TABLE[j, a]) != REJECT]
CLOCK = len(TRANSITIONS)
HIDDEN = CLOCK + 1


def build(N: int = 16) -> RNN:
    """The hand-set recogniser (it works for every length; N only sizes the task spec)."""
    model = RNNConfig(cell="relu", hidden=HIDDEN, bidirectional=False, embed=4).build(Dyck(N=N).spec)
    target = [int(DFA_TABLE[j, a]) for j, a in TRANSITIONS]
    Wih, Whh = torch.zeros(HIDDEN, 4), torch.zeros(HIDDEN, HIDDEN)
    b = torch.zeros(HIDDEN)
    for u, (j, a) in enumerate(TRANSITIONS):
        Wih[u, a] = 1.0
        b[u] = -1.0
        for v, t in enumerate(target):
            if t == j:
                Whh[u, v] = 1.0
        if j == ACCEPT:  # the empty stack is also the state before the first symbol
            Whh[u, CLOCK] = -1.0
            b[u] += 1.0
    Wih[CLOCK, :] = 1.0  # any symbol sets the clock
    ro = torch.zeros(2, HIDDEN)
    ro_b = torch.tensor([0.5, 1.0])  # logit1 = I_empty(h) = 1 - clock + sum(empty-ending units)
    ro[1, CLOCK] = -1.0
    for v, t in enumerate(target):
        if t == ACCEPT:
            ro[1, v] = 1.0
    with torch.no_grad():
        model.embed.weight.copy_(torch.eye(4))  # type: ignore[operator]
        model.rnn.weight_ih_l0.copy_(Wih)
        model.rnn.weight_hh_l0.copy_(Whh)
        model.rnn.bias_ih_l0.copy_(b)
        model.rnn.bias_hh_l0.zero_()
        model.readout.weight.copy_(ro)
        model.readout.bias.copy_(ro_b)
    return model


@torch.no_grad()
def step(model: RNN, h: torch.Tensor, a: int) -> torch.Tensor:
    """One step of the model's own nn.RNN from hidden h (HIDDEN,) on symbol a."""
    x = model.embed(torch.tensor([[a]]))
    _, hn = model.rnn(x, h.view(1, 1, -1))
    return hn.view(-1)


def decode_state(h: torch.Tensor) -> int:
    """The DFA state a binary hidden vector stands for (REJECT for the dead state)."""
    on = [u for u in range(CLOCK) if h[u] == 1]
    if h[CLOCK] == 0 and not on:
        return ACCEPT
    if len(on) == 1 and h[CLOCK] == 1:
        j, a = TRANSITIONS[on[0]]
        return int(DFA_TABLE[j, a])
    return REJECT if (not on and h[CLOCK] == 1) else -1


@torch.no_grad()
def reachability_proof(model: RNN) -> dict:
    """BFS over reachable hidden vectors; checks binariness, decoding, DFA agreement and the
    readout on every (vector, symbol) pair. Returns the graph for path counting."""
    h0 = torch.zeros(HIDDEN)
    key = lambda h: tuple(int(v) for v in h)  # noqa: E731
    seen, frontier, edges, ok = {key(h0): h0}, [h0], {}, True
    while frontier:
        nxt = []
        for h in frontier:
            s = decode_state(h)
            logit = model.readout(h)
            ok &= s != -1 and bool(((h == 0) | (h == 1)).all())
            ok &= bool((logit[1] > logit[0]) == (s == ACCEPT))
            for a in range(4):
                h2 = step(model, h, a)
                ok &= bool(((h2 == 0) | (h2 == 1)).all()) and decode_state(h2) == int(DFA_TABLE[s, a])
                edges[(key(h), a)] = key(h2)
                if key(h2) not in seen:
                    seen[key(h2)] = h2
                    nxt.append(h2)
        frontier = nxt
    accept = {k for k, h in seen.items() if decode_state(h) == ACCEPT}
    return {"ok": ok, "vectors": len(seen), "edges": edges, "accept": accept, "start": key(h0)}


def count_accepted(proof: dict, L: int) -> int:
    """Strings of length L the RNN accepts, by path counting over the reachable vectors."""
    ways = {proof["start"]: 1}
    for _ in range(L):
        new: dict = {}
        for k, w in ways.items():
            for a in range(4):
                k2 = proof["edges"][(k, a)]
                new[k2] = new.get(k2, 0) + w
        ways = new
    return sum(w for k, w in ways.items() if k in proof["accept"])


@torch.no_grad()
def predict(model: RNN, x: torch.Tensor, chunk: int = 65536) -> torch.Tensor:
    return torch.cat([model(x[i:i + chunk])[:, -1].argmax(-1) for i in range(0, len(x), chunk)])


def all_strings(L: int) -> torch.Tensor:
    """All 4^L strings as (4^L, L) token ids."""
    return torch.cartesian_prod(*[torch.arange(4)] * L).view(-1, L) if L > 1 else torch.arange(4).view(-1, 1)


@CONSTRUCTIONS.register("dyck-rnn")
class DyckRNNConstruction(Construction):
    description = "bounded Dyck-(2,2): the 7-state DFA in a 13-unit ReLU RNN"
    default_Ns = (100, 1000, 10_000)

    def __init__(self, exhaustive_up_to: int = 10, reference_up_to: int = 8, count_up_to: int = 16,
                 strings: int = 64):
        self.exhaustive_up_to, self.reference_up_to = exhaustive_up_to, reference_up_to
        self.count_up_to, self.strings = count_up_to, strings

    def memory(self, N: int) -> float:
        # `strings` sequences of length N (int64 tokens, one-hot float inputs, 13 hidden units)
        return 4 * self.strings * N * (8 + 4 * 4 + 4 * 13)

    def run(self, Ns: Sequence[int], seed: int = 0) -> list[dict]:
        model = build()
        size = {"hidden": HIDDEN, "params": model.n_params(), "state_size": model.state_size(1)}
        proof = reachability_proof(model)
        rows = [{"check": "reachable-hidden-vectors proof (all lengths)", "L": "any",
                 "strings": "all", "accuracy": 1.0 if proof["ok"] else 0.0,
                 "detail": f"{proof['vectors']} reachable vectors, all binary, all agree with the DFA", **size}]
        for L in range(1, self.exhaustive_up_to + 1):
            x = all_strings(L)
            pred = predict(model, x)
            acc = float((pred == dyck_accepts(x).long()).float().mean())
            detail = f"{int(pred.sum())} accepted"
            if L <= self.reference_up_to:  # a string-based reference independent of the DFA
                ref = torch.tensor([brute_force_member(decode(s)) for s in x]).long()
                acc = min(acc, float((pred == ref).float().mean()))
                detail += ", checked against the string reference too"
            rows.append({"check": "exhaustive", "L": L, "strings": len(x), "accuracy": acc, "detail": detail, **size})
        for L in range(2, self.count_up_to + 1, 2):
            n = count_accepted(proof, L)
            rows.append({"check": "path count", "L": L, "strings": 4**L, "accuracy": 1.0 if n == 2 ** (L - 1) else 0.0,
                         "detail": f"accepts {n} = 2^{L - 1}" if n == 2 ** (L - 1) else f"accepts {n} != 2^{L - 1}",
                         **size})
        gen = torch.Generator().manual_seed(seed)
        for N in Ns:
            N = N + N % 2
            task = Dyck(N=N)
            b = task.sample(self.strings, gen)
            acc = float((predict(model, b.x, 16) == b.y).float().mean())
            rows.append({"check": "task strings (balanced)", "L": N, "strings": self.strings, "accuracy": acc,
                         "detail": f"{int(b.y.sum())} positives", **size})
            u = torch.randint(0, 4, (self.strings, N), generator=gen)
            acc = float((predict(model, u, 16) == dyck_accepts(u).long()).float().mean())
            rows.append({"check": "uniform strings", "L": N, "strings": self.strings, "accuracy": acc,
                         "detail": "", **size})
        return rows

    def plot(self, rows: list[dict], stem: Path) -> list[Path]:
        from ..reporting.plots import plt, save

        fig, ax = plt.subplots(figsize=(6.5, 3.8))
        groups: dict[Any, list] = {}
        for r in rows:
            if isinstance(r["L"], int):
                groups.setdefault(r["check"], []).append(r)
        for k, (name, rs) in enumerate(groups.items()):
            ax.plot([r["L"] for r in rs], [r["accuracy"] for r in rs], "osD^v"[k % 5], label=name)
        ax.set_xscale("log")
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("string length")
        ax.set_ylabel("accuracy")
        ax.set_title(f"Dyck-(2,2), ReLU RNN with {HIDDEN} hidden units")
        ax.legend(fontsize=8)
        return save(fig, stem)
