"""Formal-language tasks (Delétang et al. 2023, the Chomsky-hierarchy benchmark): parity,
even-pairs, modular-arithmetic, reverse-string, duplicate-string, stack-manipulation.

Each task's labels are recomputed here by an oracle of its own, in plain Python one example at a
time (a list as the stack, Python's own parser for the precedence of an expression), and must
agree with the task on every example drawn; the chance accuracies are checked by counting (and,
where they are not 1/2, against exact enumeration of every input of a small length)."""
from __future__ import annotations

import dataclasses
import itertools
import math
import re
from fractions import Fraction

import pytest
import torch

from archsep.errors import ArchsepError
from archsep.tasks import TASKS, make_task
from archsep.tasks import (duplicate_string, even_pairs, modular_arithmetic, parity, reverse_string,
                           stack_manipulation)
from archsep.tasks.modular_arithmetic import value_distribution
from archsep.tasks.stack_manipulation import expected_length
from archsep.testing import check_task
from chomsky_oracles import (CLASS_ORACLES, POP, PUSH0, PUSH1, SEQ_ORACLES, check_against_oracle, input_length,
                             modular_oracle, stack_oracle)

MODULES = {"parity": parity, "even-pairs": even_pairs, "modular-arithmetic": modular_arithmetic,
           "reverse-string": reverse_string, "duplicate-string": duplicate_string,
           "stack-manipulation": stack_manipulation}
NAMES = list(MODULES)
CLASSIFY = ["parity", "even-pairs", "modular-arithmetic"]
SEQ2SEQ = ["reverse-string", "duplicate-string", "stack-manipulation"]


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- labels: every example agrees with the oracle -----------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_labels_agree_with_the_oracle(name):
    small = 7 if name == "modular-arithmetic" else 6
    for task, seed in ((make_task(name), 0), (make_task(name, N=small), 1)):
        check_against_oracle(name, task.sample_test(300, gen(seed)), task.N)
        for s in range(3):  # variable training lengths, one per batch
            b = task.sample(100, gen(10 + s))
            check_against_oracle(name, b, input_length(name, b))


@pytest.mark.parametrize("name", NAMES)
def test_other_lengths_also_agree_with_the_oracle(name):
    task = make_task(name, N=9)
    for k in (1, 3, 25):  # shorter and longer than N (length generalisation)
        if name == "even-pairs" and k == 1:
            assert (task.sample_length(50, 1, gen(k)).y == 1).all()  # a single symbol: no pairs, even
            continue
        b = task.sample_length(200, k, gen(k))
        check_against_oracle(name, b, k)
        longer = dataclasses.replace(task, N=k)  # a task whose spec and test set are at length k
        assert longer.sample_test(8, gen(k)).x.shape[1] == b.x.shape[1] == longer.spec.seq_len


def test_every_short_input_agrees_with_the_oracle_exhaustively():
    for k in range(1, 9):
        bits = torch.tensor(list(itertools.product((0, 1), repeat=k)))
        for name in ("parity", "even-pairs", "reverse-string", "duplicate-string"):
            check_against_oracle(name, make_task(name, N=max(2, k)).encode(bits), k)
    for k in (1, 3, 5):
        exprs = list(itertools.product(*[range(5) if i % 2 == 0 else range(5, 8) for i in range(k)]))
        check_against_oracle("modular-arithmetic", make_task("modular-arithmetic", N=k).encode(torch.tensor(exprs)), k)
    task = make_task("stack-manipulation", N=6)
    for k in range(1, 7):
        inputs = [list(bits) + list(ops) for s in range(1, max(2, k)) for bits in itertools.product((0, 1), repeat=s)
                  for ops in itertools.product((POP, PUSH0, PUSH1), repeat=k - s)]
        check_against_oracle("stack-manipulation", task.encode(torch.tensor(inputs)), k)


def test_modular_arithmetic_uses_standard_precedence():
    t = make_task("modular-arithmetic", N=5)
    enc = lambda s: torch.tensor([[int(c) if c.isdigit() else 5 + "+-*".index(c) for c in s.split()]])  # noqa: E731
    assert int(t.encode(enc("1 + 2 * 3")).y) == 2  # 1 + 6 = 7, not (1 + 2) * 3 = 9
    assert int(t.encode(enc("1 - 1 - 1")).y) == 4  # (1 - 1) - 1 = -1, not 1 - (1 - 1) = 1
    assert int(t.encode(enc("4 - 2 * 3")).y) == 3  # 4 - 6 = -2
    assert int(t.encode(enc("2 * 3 * 4")).y) == 4  # 24
    assert int(make_task("modular-arithmetic", N=3, modulus=7).encode(torch.tensor([[6, 9, 6]])).y) == 1  # 36 mod 7


# --- the docstring's example --------------------------------------------------------------------
EXAMPLE = re.compile(r"\(ids ([\d ]+), N = (\d+)\)\s+->\s+(label|targets) (\d+(?: \d+)*)")


@pytest.mark.parametrize("name", NAMES)
def test_the_docstring_example(name):
    doc = MODULES[name].__doc__
    assert doc is not None
    found = EXAMPLE.search(doc)
    assert found, f"{name}: no 'x = ... (ids ..., N = ...)  ->  label/targets ...' line"
    ids = [int(t) for t in found.group(1).split()]
    N = int(found.group(2))
    want = [int(t) for t in found.group(4).split()]
    task = make_task(name, N=N)
    b = task.encode(torch.tensor([ids[:N]]))
    assert b.x[0].tolist() == ids
    if found.group(3) == "label":
        assert name in CLASSIFY and [int(b.y[0])] == want == [CLASS_ORACLES[name](ids)]
    else:
        assert name in SEQ2SEQ and b.mask is not None
        assert b.y[0][b.mask[0]].tolist() == want == SEQ_ORACLES[name][0](ids[:N])


# --- chance accuracy ----------------------------------------------------------------------------
def count_chance(task, n: int, seed: int) -> tuple[float, float]:
    """The frequency of the most frequent target among n test examples, pooled over the targets
    read, and its standard error over examples."""
    b = task.sample_test(n, gen(seed))
    y = b.y.unsqueeze(1) if b.mask is None else b.y
    w = torch.ones_like(y, dtype=torch.bool) if b.mask is None else b.mask
    counts = torch.bincount(y[w], minlength=task.spec.output_dim)
    mode = int(counts.argmax())
    hits, reads = ((y == mode) & w).sum(1).double(), w.sum(1).double()
    freq = float(hits.sum() / reads.sum())
    se = float((hits - freq * reads).std() / reads.mean() / math.sqrt(n))  # ratio estimator, over examples
    return freq, se


@pytest.mark.parametrize("name, params", [(n, {}) for n in NAMES] + [
    ("modular-arithmetic", {"N": 3}), ("modular-arithmetic", {"N": 7}), ("stack-manipulation", {"N": 2}),
    ("stack-manipulation", {"N": 5}), ("even-pairs", {"N": 2})])
def test_chance_accuracy_by_counting(name, params):
    task = make_task(name, **params)
    freq, se = count_chance(task, 20000, 3)
    assert abs(freq - task.chance_accuracy) < max(4 * se, 1e-3), (freq, task.chance_accuracy, se)
    assert math.isclose(task.baseline, 1 - task.chance_accuracy)


def test_modular_arithmetic_distribution_is_exact():
    for m, k in ((5, 1), (5, 3), (5, 5), (5, 7), (3, 5), (4, 5)):
        counts = [Fraction(0)] * m
        exprs = list(itertools.product(*[range(m) if i % 2 == 0 else range(3) for i in range(k)]))
        for e in exprs:
            counts[modular_oracle([t if i % 2 == 0 else m + t for i, t in enumerate(e)], m)] += 1
        exact = [c / len(exprs) for c in counts]
        assert all(math.isclose(p, float(q), abs_tol=1e-12) for p, q in zip(value_distribution(m, k), exact)), (m, k)
    assert math.isclose(make_task("modular-arithmetic", N=3).chance_accuracy, 19 / 75)
    assert 0.2 < make_task("modular-arithmetic").chance_accuracy < 0.20005  # 0 the most frequent value, barely


def test_stack_manipulation_chance_is_exact():
    """E[final length] and the pooled chance accuracy by enumerating every input of length k with
    its probability: s ~ U{1..k-1}, then uniform bits and uniform operations."""
    for k in range(1, 7):
        length, ones, ends = Fraction(0), Fraction(0), Fraction(0)
        for s in range(1, max(2, k)):
            p = Fraction(1, max(1, k - 1)) / (2**s * 3 ** (k - s))
            for bits in itertools.product((0, 1), repeat=s):
                for ops in itertools.product((POP, PUSH0, PUSH1), repeat=k - s):
                    out = stack_oracle(list(bits) + list(ops))
                    length += p * (len(out) - 1)
                    ones += p * out.count(1)
                    ends += p
        assert math.isclose(expected_length(k), float(length)), k
        assert ones * 2 == length  # the stack's bits are fair coins
        chance = max(length / 2, ends) / (length + ends)
        assert math.isclose(make_task("stack-manipulation", N=k).chance_accuracy, float(chance)), k


# --- trivial baselines --------------------------------------------------------------------------
def majority_accuracy(N: int) -> float:
    """Exact accuracy, pooled over N fair bits, of predicting each of them by the majority bit
    of all N (0 on a tie): E[max(K, N - K)] / N for K ~ Bin(N, 1/2)."""
    total = Fraction(0)
    for K in range(N + 1):  # K ones
        right = K if K > N - K else N - K
        total += Fraction(math.comb(N, K), 2**N) * Fraction(right, N)
    return float(total)


def test_trivial_baselines():
    g = gen(5)
    for name in CLASSIFY:
        found = make_task(name).trivial_baselines(1000, g)  # the constant alone, drawing nothing
        assert list(found) == ["constant"] and math.isclose(found["constant"], make_task(name).chance_accuracy)
    for name, N in (("reverse-string", 40), ("duplicate-string", 40), ("reverse-string", 7)):
        found = make_task(name, N=N).trivial_baselines(20000, gen(6))
        assert abs(found["constant"] - 0.5) < 0.01
        assert abs(found["input-majority"] - majority_accuracy(N)) < 0.01, found
        if name == "reverse-string":
            assert abs(found["copy-input"] - (0.5 + (N % 2) / (2 * N))) < 0.01, found
    assert make_task("reverse-string", N=40).best_trivial(20000, gen(6))[0] == "input-majority"
    assert 0.562 < majority_accuracy(40) < 0.564  # the docstrings' 56.3%
    stack = make_task("stack-manipulation")
    found = stack.trivial_baselines(20000, gen(7))
    assert abs(found["constant"] - stack.chance_accuracy) < 0.01
    assert found["input-majority"] > found["constant"] + 0.03, found


# --- lengths, parameters, determinism -----------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_variable_training_lengths(name):
    task = make_task(name, N=11 if name == "modular-arithmetic" else 10, min_length=4)
    lo = 5 if name == "modular-arithmetic" else 4  # min_length rounded up to an odd length
    lengths = set()
    for s in range(60):
        b = task.sample(2, gen(s))
        lengths.add(input_length(name, b))
    valid = set(range(lo, task.N + 1, 2 if name == "modular-arithmetic" else 1))
    assert lengths == valid, lengths
    assert not task.fixed_shapes
    fixed = dataclasses.replace(task, train_lengths="fixed")
    assert fixed.fixed_shapes and {fixed.sample(2, gen(s)).x.shape[1] for s in range(10)} == {fixed.spec.seq_len}
    assert task.sample_test(2, gen(0)).x.shape[1] == task.spec.seq_len
    clipped = make_task(name, N=5, min_length=9)  # min_length above N: clipped to N
    assert clipped.sample(2, gen(0)).x.shape == clipped.sample_test(2, gen(0)).x.shape


@pytest.mark.parametrize("name", NAMES)
def test_determinism(name):
    task = make_task(name)
    for sampler in (task.sample, task.sample_test):
        a, b, c = sampler(64, gen(1)), sampler(64, gen(1)), sampler(64, gen(2))
        for f in ("x", "y", "mask"):
            assert (getattr(a, f) is None) == (getattr(b, f) is None)
            assert getattr(a, f) is None or torch.equal(getattr(a, f), getattr(b, f))
        assert a.x.shape != c.x.shape or not torch.equal(a.x, c.x)
    assert task.trivial_baselines(200, gen(3)) == task.trivial_baselines(200, gen(3))


@pytest.mark.parametrize("name, params, field", [
    ("parity", {"N": 0}, "N"), ("even-pairs", {"N": 1}, "N"), ("modular-arithmetic", {"N": 10}, "N"),
    ("modular-arithmetic", {"modulus": 1}, "modulus"), ("reverse-string", {"train_lengths": "sometimes"},
                                                        "train_lengths"),
    ("duplicate-string", {"min_length": 0}, "min_length"), ("stack-manipulation", {"N": -3}, "N"),
])
def test_bad_parameters_name_the_field(name, params, field):
    with pytest.raises(ArchsepError, match=rf"(^|\.){field}: "):
        make_task(name, **params)


def test_bad_lengths_name_k():
    with pytest.raises(ArchsepError, match=r"^k: must be an odd integer"):
        make_task("modular-arithmetic").sample_length(4, 8, gen())
    with pytest.raises(ArchsepError, match=r"^k: "):
        make_task("parity").sample_length(4, 0, gen())


@pytest.mark.parametrize("name, params", [("modular-arithmetic", {"N": 3, "train_lengths": "fixed"}),
                                          ("stack-manipulation", {"N": 1}), ("even-pairs", {"N": 2}),
                                          ("duplicate-string", {"N": 3, "train_lengths": "fixed"})])
def test_small_variants_keep_the_contract(name, params):
    assert "trivial-baselines" in check_task(name, **params)


def test_registered_with_their_kinds_and_readouts():
    for name in NAMES:
        cls = TASKS.get(name)
        assert cls.registry_name == name and cls.kind == "classification"
        assert make_task(name).spec.readout == ("last" if name in CLASSIFY else "mask")
