"""Trivial baselines of the classification tasks (Task.trivial_baselines, best_trivial) and
Dyck's depth-preserving type-swap negatives, each checked against an independent per-example
Python oracle; the measured baselines of paper A's presets (Dyck N = 50, 100; nearest neighbour
N = 20, 40, the tasks' default parameters as the presets use them) reproduced. Every draw is
seeded."""
from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import torch

from archsep.errors import ArchsepError
from archsep.tasks import make_task
from archsep.tasks.dyck import MAX_DEPTH, Dyck, brute_force_member, decode, depth_counter_accepts, dyck_accepts
from archsep.tasks.equality import Equality
from archsep.tasks.index_lookup import IndexLookup
from archsep.tasks.nearest_neighbour import NearestNeighbour


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- independent oracles: one example at a time, in plain Python --------------------------------
def depth_counter_oracle(s: str, bound: int | None = MAX_DEPTH) -> bool:
    """Type-blind: opens minus closes never below 0 (nor above `bound`), 0 at the end."""
    depth = 0
    for ch in s:
        depth += 1 if ch in "([" else -1
        if depth < 0 or (bound is not None and depth > bound):
            return False
    return depth == 0


def best_constant_oracle(labels: list[int]) -> float:
    return max(Counter(labels).values()) / len(labels)


def labelled_majority_oracle(x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, d: int) -> tuple[int, int]:
    """(correct, total) over the queries of one example; the majority of the shown labels, a tie -> 0."""
    shown = [int(x[j, d + 1] > x[j, d]) for j in range(x.shape[0]) if float(x[j, d:].sum()) == 1.0]
    guess = 1 if shown.count(1) > shown.count(0) else 0
    targets = [int(y[j]) for j in range(len(y)) if bool(mask[j])]
    return sum(t == guess for t in targets), len(targets)


def sequence_mode_oracle(symbols: list[int]) -> int:
    counts = Counter(symbols)
    top = max(counts.values())
    return min(s for s, c in counts.items() if c == top)


# --- Dyck: the depth counter ---------------------------------------------------------------------
def test_depth_counter_equals_the_oracle_on_every_string_up_to_length_8():
    for L in range(1, 9):
        x = torch.tensor(list(itertools.product(range(4), repeat=L)))
        for bound in (MAX_DEPTH, None):
            got = depth_counter_accepts(x, bound).tolist()
            assert got == [depth_counter_oracle(decode(r), bound) for r in x], (L, bound)


def test_depth_counter_accepts_the_language_and_is_dyck_with_types_erased():
    x = torch.tensor(list(itertools.product(range(4), repeat=8)))
    dc, member = depth_counter_accepts(x), dyck_accepts(x)
    assert bool(dc[member].all())  # every member of bounded Dyck-(2,2)
    assert torch.equal(dc, dyck_accepts(x % 2))  # = membership once every bracket is '(' or ')'
    assert bool((dc & ~member).any())  # and more: e.g. '([' ... '])' style type mismatches


@pytest.mark.parametrize("N", [8, 50])
def test_dyck_depth_counter_baseline_is_the_per_example_oracle(N):
    t = Dyck(N=N)
    b = t.sample_test(300, gen(3))  # trivial_baselines draws this very test set from the same seed
    strings = [decode(r) for r in b.x]
    want_dc = sum(depth_counter_oracle(s) == bool(y) for s, y in zip(strings, b.y.tolist())) / 300
    want_const = best_constant_oracle(b.y.tolist())
    got = t.trivial_baselines(300, gen(3))
    assert set(got) == {"constant", "depth-counter"}
    assert got["depth-counter"] == pytest.approx(want_dc, abs=1e-6)
    assert got["constant"] == pytest.approx(want_const, abs=1e-6)


def test_depth_counter_on_positives_and_on_each_kind_of_negative():
    t = Dyck(N=50)
    g = gen(5)
    pos = t.positives(400, g)
    assert bool(depth_counter_accepts(pos).all())
    before = t.positives(2000, g)
    after = t.corrupt(before, g)
    flips = ((before ^ after) & 1).sum(1)  # open/close flips; the other corruptions swap a type
    dc = depth_counter_accepts(after)
    assert not bool(dc[flips % 2 == 1].any())  # an odd number of flips moves the final depth off 0
    assert bool(dc[flips == 0].all())  # type swaps alone keep the depth profile
    assert bool((flips == 0).any()) and bool((flips % 2 == 1).any())
    oracle = torch.tensor([depth_counter_oracle(decode(r)) for r in after[:300]])
    assert torch.equal(dc[:300], oracle)


# --- Dyck: type-swap negatives -------------------------------------------------------------------
@pytest.mark.parametrize("N", [2, 4, 10, 50, 100])
def test_type_swaps_fool_the_depth_counter_and_are_not_in_the_language(N):
    t = Dyck(N=N)
    b = t.sample_type_swaps(300, gen(N))
    assert b.x.shape == (300, N) and b.x.dtype == torch.long and bool(((b.x >= 0) & (b.x < 4)).all())
    assert torch.equal(b.y, torch.zeros(300, dtype=torch.long))
    strings = [decode(r) for r in b.x]
    assert all(depth_counter_oracle(s) for s in strings)  # the depth counter accepts each one...
    assert not any(brute_force_member(s) for s in strings)  # ...and none is in the language
    assert not bool(dyck_accepts(b.x).any())
    # a model that only counts depth scores 0% on them
    assert t.label_accuracy(depth_counter_accepts(b.x).long(), b) == 0.0


def test_type_swaps_differ_from_a_positive_in_types_only_and_vary():
    t = Dyck(N=50)
    b = t.sample_type_swaps(500, gen(1))
    assert bool(dyck_accepts(b.x % 2).all())  # with types erased: a positive's shape
    assert len({decode(r) for r in b.x}) == 500
    assert torch.equal(b.x, t.sample_type_swaps(500, gen(1)).x)  # seeded
    assert not torch.equal(b.x, t.sample_type_swaps(500, gen(2)).x)


def test_dyck_sample_draws_what_it_drew_before_type_swaps_existed():
    # read at commit 3429c03, before trivial baselines and type swaps: run ids depend on this stream
    b = Dyck(N=20).sample(64, gen(0))
    assert [decode(b.x[0]), decode(b.x[1])] == ["(())[[][][][]()][[])", "(())[](()[][][]()[])"]
    assert b.y[:8].tolist() == [0, 1, 1, 0, 1, 1, 1, 1] and int(b.y.sum()) == 38
    assert int(b.x.sum()) == 1922


# --- equality: same-counts negatives ------------------------------------------------------------
@pytest.mark.parametrize("variant,N", [("eq-random", 4), ("eq-random", 6), ("eq-random", 40), ("eq-one", 4),
                                       ("eq-one", 40)])
def test_same_counts_negatives_fool_symbol_counting_and_are_unequal(variant, N):
    t = Equality(N=N, variant=variant)
    b = t.sample_same_counts(300, gen(N))
    m = N // 2
    assert b.x.shape == (300, N + 1) and bool((b.x[:, m] == t.sep).all()) and bool((b.x[:, :m] < t.vocab).all())
    assert torch.equal(b.y, torch.zeros(300, dtype=torch.long))
    a, bb = b.x[:, :m], b.x[:, m + 1:]
    for ra, rb in zip(a.tolist(), bb.tolist()):  # oracle: b is a rearrangement of a and not a
        assert sorted(ra) == sorted(rb) and ra != rb
        if variant == "eq-one":  # exactly two positions differ, holding each other's symbols
            diff = [i for i in range(m) if ra[i] != rb[i]]
            assert len(diff) == 2 and ra[diff[0]] == rb[diff[1]] and ra[diff[1]] == rb[diff[0]]
    # counting symbols accepts every one: it scores 0% on them
    assert t.label_accuracy(t.symbol_counts_equal(b.x).long(), b) == 0.0
    assert set(t.extra_tests(10, gen(0))) == {"same-counts"}


def test_same_counts_need_two_symbols_to_reorder():
    assert Equality(N=2).extra_tests(5, gen(0)) == {}
    with pytest.raises(ArchsepError, match="N"):
        Equality(N=2).sample_same_counts(5, gen(0))


def test_same_counts_negatives_are_seeded_and_shuffles_on_eq_random():
    t = Equality(N=40)
    b = t.sample_same_counts(500, gen(1))
    assert torch.equal(b.x, t.sample_same_counts(500, gen(1)).x)
    assert not torch.equal(b.x, t.sample_same_counts(500, gen(2)).x)
    changed = (b.x[:, :20] != b.x[:, 21:]).sum(1).float()
    assert changed.mean() > 6  # a shuffle moves many positions (two swapped would change exactly 2)


# --- nearest neighbour: the labelled majority ----------------------------------------------------
@pytest.mark.parametrize("params", [{"N": 20}, {"N": 11}, {"N": 12, "mqar": True}, {"N": 10, "vectors": "sign"}])
def test_labelled_majority_is_the_per_example_oracle(params):
    t = NearestNeighbour(**params)
    b = t.sample_test(300, gen(4))
    assert b.mask is not None
    right = total = 0
    for i in range(300):
        r, n = labelled_majority_oracle(b.x[i], b.y[i], b.mask[i], t.d)
        right, total = right + r, total + n
    labels = b.y[b.mask].tolist()
    got = t.trivial_baselines(300, gen(4))
    assert set(got) == {"constant", "labelled-majority"}
    assert got["labelled-majority"] == pytest.approx(right / total, abs=1e-6)
    assert got["constant"] == pytest.approx(best_constant_oracle(labels), abs=1e-6)


def test_labelled_majority_breaks_a_tie_to_label_0():
    t = NearestNeighbour(N=8, d=2)  # m = 4 labelled points
    x = torch.zeros(1, t.length, t.d + 2)
    for j, lab in enumerate((1, 0, 1, 0)):
        x[0, 2 * j + 1, t.d + lab] = 1.0
    assert t.labelled_majority(x).unique().tolist() == [0]
    x[0, 3, t.d:] = torch.tensor([0.0, 1.0])  # now three 1s
    assert t.labelled_majority(x).unique().tolist() == [1]


def majority_exact(m: int) -> float:
    """1/2 + E|K - m/2| / m, K ~ Bin(m, 1/2): the labelled majority's expected accuracy."""
    return sum(math.comb(m, k) * max(k, m - k) for k in range(m + 1)) / (m * 2**m)


# --- index lookup and equality -------------------------------------------------------------------
def test_sequence_mode_is_the_per_example_oracle():
    t = IndexLookup(N=30, vocab=8)
    b = t.sample_test(300, gen(6))
    want = sum(sequence_mode_oracle(r[:-1]) == y for r, y in zip(b.x.tolist(), b.y.tolist())) / 300
    got = t.trivial_baselines(300, gen(6))
    assert set(got) == {"constant", "sequence-mode"}
    assert got["sequence-mode"] == pytest.approx(want, abs=1e-6)
    assert got["constant"] == pytest.approx(best_constant_oracle(b.y.tolist()), abs=1e-6)
    assert t.best_trivial(300, gen(6))[0] == "sequence-mode"


@pytest.mark.parametrize("variant", ["eq-random", "eq-one"])
def test_symbol_counts_is_the_per_example_oracle(variant):
    t = Equality(N=10 if variant == "eq-random" else 40, variant=variant)
    b = t.sample_test(300, gen(7))
    m = t.N // 2
    want = sum((sorted(r[:m]) == sorted(r[m + 1:])) == bool(y) for r, y in zip(b.x.tolist(), b.y.tolist())) / 300
    got = t.trivial_baselines(300, gen(7))
    assert set(got) == {"constant", "symbol-counts"}
    assert got["symbol-counts"] == pytest.approx(want, abs=1e-6)
    if variant == "eq-one":  # one symbol replaced by another always changes the counts
        assert got["symbol-counts"] == 1.0


def test_equality_symbol_counts_on_eq_random_is_the_equal_count_probability():
    t = Equality(N=50, variant="eq-random")
    m = 25
    same = math.comb(2 * m, m) / 4**m  # P(b has a's number of 1s), b uniform (b == a excluded: ~3e-8)
    want = 0.5 + 0.5 * (1 - same)
    assert t.trivial_baselines(4000, gen(8))["symbol-counts"] == pytest.approx(want, abs=0.015)


# --- paper A's measured numbers ------------------------------------------------------------------
@pytest.mark.parametrize("N, measured", [(50, 0.904), (100, 0.952)])
def test_dyck_depth_counter_reproduces_the_measured_accuracy(N, measured):
    t = make_task("dyck", N=N)  # dyck-fig2: the task's defaults, N from the scale
    found = t.trivial_baselines(3000, gen(2024))
    assert found["depth-counter"] == pytest.approx(measured, abs=0.02)
    assert found["constant"] == pytest.approx(0.5, abs=0.03)
    assert t.best_trivial(3000, gen(2024)) == ("depth-counter", found["depth-counter"])


@pytest.mark.parametrize("N, measured", [(20, 0.623), (40, 0.588)])
def test_nearest_neighbour_labelled_majority_reproduces_the_measured_accuracy(N, measured):
    t = make_task("nearest-neighbour", N=N)  # nn-fig: d = 16 unit vectors, the task's defaults
    found = t.trivial_baselines(3000, gen(2024))
    assert found["labelled-majority"] == pytest.approx(measured, abs=0.02)
    assert found["labelled-majority"] == pytest.approx(majority_exact(N // 2), abs=0.02)
    assert found["constant"] == pytest.approx(0.5, abs=0.03)
    assert t.best_trivial(3000, gen(2024)) == ("labelled-majority", found["labelled-majority"])


# --- the interface -------------------------------------------------------------------------------
def test_trivial_baselines_are_seeded():
    t = Dyck(N=20)
    assert t.trivial_baselines(500, gen(0)) == t.trivial_baselines(500, gen(0))
    assert t.trivial_baselines(500, gen(0)) != t.trivial_baselines(500, gen(1))


def test_a_regression_task_has_no_accuracy_baselines():
    with pytest.raises(ArchsepError, match="regression"):
        make_task("qstr", N=6, d=4).trivial_baselines(16, gen(0))
