"""Paper-A tasks: index lookup, bounded Dyck-(2,2), string equality, nearest neighbour / MQAR."""
from __future__ import annotations

import itertools

import pytest
import torch

from archsep.errors import ArchsepError
from archsep.tasks import make_task
from archsep.tasks.dyck import REJECT, DFA_TABLE, Dyck, brute_force_member, decode, dfa_accepts, dyck_accepts


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- bounded Dyck-(2,2): the oracle ------------------------------------------------------
def grammar_words(L: int) -> set[str]:
    """Every word of length L, generated (not recognised): D -> '' | (A) D | [A] D, where A is a
    depth-1 word, i.e. any sequence of '()' and '[]'."""
    if L % 2:
        return set()
    depth1 = {n: {"".join(p) for p in itertools.product(["()", "[]"], repeat=n // 2)} for n in range(0, L + 1, 2)}
    memo: dict[int, set[str]] = {0: {""}}
    for n in range(2, L + 1, 2):
        memo[n] = {o + a + c + rest for inner in range(0, n - 1, 2) for o, c in ("()", "[]")
                   for a in depth1[inner] for rest in memo[n - 2 - inner]}
    return memo[L]


def dfa_accepted_indices(L: int, accepts=dyck_accepts, chunk: int = 1 << 20) -> set[int]:
    """Run a recogniser on all 4^L strings (string <-> base-4 number, first symbol most significant)."""
    hits: list[torch.Tensor] = []
    powers = 4 ** torch.arange(L - 1, -1, -1)
    for start in range(0, 4**L, chunk):
        idx = torch.arange(start, min(4**L, start + chunk))
        x = (idx.unsqueeze(1) // powers) % 4
        hits.append(idx[accepts(x)])
    return set(torch.cat(hits).tolist()) if hits else set()


def index_of(s: str) -> int:
    return sum("()[]".index(ch) * 4 ** (len(s) - 1 - i) for i, ch in enumerate(s))


def test_dfa_has_7_live_states_and_an_absorbing_reject():
    assert REJECT == 7 and DFA_TABLE.shape == (8, 4)
    assert (DFA_TABLE[REJECT] == REJECT).all()


@pytest.mark.parametrize("accepts", [dfa_accepts, dyck_accepts], ids=["dfa", "vectorised"])
def test_dfa_equals_brute_force_on_every_string_up_to_length_8(accepts):
    for L in range(0, 9):
        strings = ["".join(p) for p in itertools.product("()[]", repeat=L)]
        x = torch.tensor([["()[]".index(c) for c in s] for s in strings]).reshape(len(strings), L)
        dfa = accepts(x).tolist()
        assert dfa == [brute_force_member(s) for s in strings], L


@pytest.mark.parametrize("accepts, longest", [(dfa_accepts, 12), (dyck_accepts, 10)], ids=["dfa", "vectorised"])
def test_dfa_accepts_exactly_the_language_for_every_string_up_to_length_12(accepts, longest):
    # exhaustive over all 4^L strings for L <= 12 (10 for the vectorised recogniser, whose
    # all-positions-at-once tensors make 4^12 rows slow): the recogniser's accepted set must be
    # the set of words the grammar generates, so it agrees with that reference on every string
    for L in range(1, longest + 1):
        words = grammar_words(L)
        assert dfa_accepted_indices(L, accepts) == {index_of(w) for w in words}, L
        assert len(words) == (2 ** (L - 1) if L % 2 == 0 else 0)
        assert all(brute_force_member(w) for w in words)


@pytest.mark.parametrize("N", [2, 4, 6, 20, 50, 400])
def test_dyck_positives_all_at_once_are_the_step_by_step_walk_draw_for_draw(N):
    """Same numbers from the same seed (the committed Dyck runs stay reproducible): the walk,
    and the generator's state after it."""
    task = Dyck(N=N)
    for seed in range(10):
        g1, g2 = gen(seed), gen(seed)
        assert torch.equal(task.positives(33, g1), task.positives_by_step(33, g2)), seed
        assert torch.equal(torch.rand(3, generator=g1), torch.rand(3, generator=g2))


def test_dyck_sample_stream_is_the_step_by_step_one(monkeypatch):
    """`sample` and `sample_type_swaps` (positives, corruptions, redraws through the recogniser)
    give the same batches as with the step-by-step walk and the DFA."""
    import archsep.tasks.dyck as dyck

    task = Dyck(N=40)
    got = [task.sample(64, gen(s)) for s in range(5)] + [task.sample_type_swaps(64, gen(9))]
    monkeypatch.setattr(dyck, "dyck_accepts", dfa_accepts)
    monkeypatch.setattr(Dyck, "positives", Dyck.positives_by_step)
    ref = [task.sample(64, gen(s)) for s in range(5)] + [task.sample_type_swaps(64, gen(9))]
    for a, b in zip(got, ref):
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)


def test_dyck_generated_labels_match_the_oracle_and_are_balanced():
    for N in (2, 4, 10, 50):
        t = make_task("dyck", N=N)
        b = t.sample(4000, gen(N))
        assert b.x.shape == (4000, N) and b.x.dtype == torch.long
        assert (dyck_accepts(b.x).long() == b.y).all()  # every positive accepted, every negative rejected
        assert abs(b.y.float().mean().item() - 0.5) < 0.04
    t = make_task("dyck", N=12)
    b = t.sample(300, gen(1))
    assert all(brute_force_member(decode(s)) == bool(y) for s, y in zip(b.x, b.y))
    assert t.baseline == 0.5 and t.chance_accuracy == 0.5


def test_dyck_negatives_are_few_corruptions_of_positives():
    t = make_task("dyck", N=40)
    g = gen(3)
    pos = t.positives(500, g)
    assert dyck_accepts(pos).all()
    bad = t.corrupt(pos, g)
    changed = (bad != pos).sum(1)
    assert changed.min() >= 1 and changed.max() <= t.max_corruptions == 4
    neg = t.negatives(500, g)
    assert not dyck_accepts(neg).any()


def test_dyck_positives_reach_depth_two_and_use_both_types():
    x = make_task("dyck", N=30).positives(200, gen(4))
    depth = torch.cumsum(torch.where(x % 2 == 0, 1, -1), 1)
    assert depth.max() == 2 and depth.min() == 0
    assert (x == 0).any() and (x == 2).any()


def test_dyck_bad_params():
    for N in (0, 7, -2):
        with pytest.raises(ArchsepError, match="^N:"):
            make_task("dyck", N=N)


# --- index lookup --------------------------------------------------------------------------
def test_index_lookup_label_is_the_indexed_symbol():
    t = make_task("index-lookup", N=30, train_lengths="fixed")
    b = t.sample(500, gen())
    assert b.x.shape == (500, 31)
    p = b.x[:, -1] - t.vocab
    assert ((p >= 0) & (p < 30)).all()
    assert (b.x[:, :-1].gather(1, p.unsqueeze(1)).squeeze(1) == b.y).all()
    assert (b.x[:, :-1] < t.vocab).all()
    # changing the indexed symbol changes the label; changing any other symbol does not
    assert (p == b.tuples.squeeze(1)).all()


def test_index_lookup_variable_lengths_and_test_at_N():
    t = make_task("index-lookup", N=40)
    g = gen(1)
    lengths = {t.sample(4, g).x.shape[1] - 1 for _ in range(400)}
    assert min(lengths) == 10 and max(lengths) == 40 and len(lengths) > 25
    assert t.sample_test(8, g).x.shape == (8, 41)
    assert t.spec.seq_len == 41 and t.spec.input_dim == 64 + 40 and t.spec.output_dim == 64


def test_index_lookup_chance_and_label_spread():
    t = make_task("index-lookup", N=20)
    assert t.chance_accuracy == 1 / 64 and t.baseline == pytest.approx(63 / 64)
    y = t.sample_test(20000, gen(2)).y
    freq = torch.bincount(y, minlength=64).float() / len(y)
    assert freq.max() < 2.0 / 64  # no constant beats chance by much
    # the best constant predictor on the sample is near chance
    assert 1 - freq.max().item() > t.baseline - 0.02


def test_index_lookup_bad_params():
    with pytest.raises(ArchsepError, match="^N:"):
        make_task("index-lookup", N=0)
    with pytest.raises(ArchsepError, match="^vocab:"):
        make_task("index-lookup", vocab=1)
    with pytest.raises(ArchsepError, match="train_lengths"):
        make_task("index-lookup", train_lengths="sometimes")


def test_index_lookup_is_reproducible_from_the_generator():
    t = make_task("index-lookup", N=25)
    a, b = t.sample(16, gen(9)), t.sample(16, gen(9))
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)


# --- equality ------------------------------------------------------------------------------
@pytest.mark.parametrize("variant,vocab", [("eq-random", 2), ("eq-one", 1024)])
def test_equality_labels_and_balance(variant, vocab):
    t = make_task("equality", N=20, variant=variant, train_lengths="fixed")
    b = t.sample(4000, gen())
    assert b.x.shape == (4000, 21) and (b.x[:, 10] == vocab).all()
    a, c = b.x[:, :10], b.x[:, 11:]
    assert ((a == c).all(1).long() == b.y).all()
    assert (a < vocab).all() and (c < vocab).all()
    assert abs(b.y.float().mean().item() - 0.5) < 0.04
    assert t.chance_accuracy == 0.5 and t.baseline == 0.5


def test_eq_one_negatives_differ_in_exactly_one_position():
    b = make_task("equality", N=30, variant="eq-one", train_lengths="fixed").sample(2000, gen(1))
    diff = (b.x[:, :15] != b.x[:, 16:]).sum(1)
    assert (diff[b.y == 0] == 1).all() and (diff[b.y == 1] == 0).all()


def test_eq_random_negatives_differ_from_a_even_at_tiny_lengths():
    b = make_task("equality", N=2, variant="eq-random", train_lengths="fixed").sample(2000, gen(2))
    assert ((b.x[:, 0] == b.x[:, 2]).long() == b.y).all()
    assert abs(b.y.float().mean().item() - 0.5) < 0.05


def test_equality_training_lengths_are_even_in_N_over_10_to_N():
    t = make_task("equality", N=100)
    g = gen(3)
    lengths = {t.sample(2, g).x.shape[1] - 1 for _ in range(600)}
    assert lengths == set(range(10, 101, 2))
    assert t.sample_test(4, g).x.shape == (4, 101)


def test_equality_bad_params():
    with pytest.raises(ArchsepError, match="^N:"):
        make_task("equality", N=9)
    with pytest.raises(ArchsepError, match="variant"):
        make_task("equality", variant="eq-two")


# --- nearest neighbour ----------------------------------------------------------------------
@pytest.mark.parametrize("vectors", ["unit", "sign"])
@pytest.mark.parametrize("mqar", [False, True])
def test_nearest_neighbour_labels_and_margin(vectors, mqar):
    t = make_task("nearest-neighbour", N=20, d=16, vectors=vectors, mqar=mqar, gamma=0.1)
    b = t.sample(300, gen())
    m, d = t.m, t.d
    assert b.x.shape == (300, 30, d + 2) and b.mask.sum(1).eq(10).all()
    keys, labels = b.x[:, 0:2 * m:2, :d], b.x[:, 1:2 * m:2, d:].argmax(-1)
    queries = b.x[:, 2 * m:, :d]
    assert torch.allclose(keys.norm(dim=-1), torch.ones(())) and torch.allclose(queries.norm(dim=-1), torch.ones(()))
    s = queries @ keys.transpose(1, 2)
    top = s.topk(2, dim=-1)
    assert (top.values[..., 0] - top.values[..., 1] >= 0.1 - 1e-6).all()  # margin enforced
    assert (labels.gather(1, top.indices[..., 0]) == b.y[:, 2 * m:]).all()  # label of the nearest
    assert (b.x[:, 2 * m:, d:] == 0).all()  # no query label leaks into the input
    if mqar:  # the queries are a permutation of the labelled points
        assert (top.values[..., 0] > 1 - 1e-5).all()
        assert (torch.sort(b.tuples, 1).values == torch.arange(m)).all()
    if vectors == "sign":
        assert torch.allclose(keys.abs(), torch.full((), d**-0.5))
    assert abs(b.y[b.mask].float().mean().item() - 0.5) < 0.05
    assert t.chance_accuracy == 0.5 and t.baseline == 0.5


def test_nearest_neighbour_impossible_margin_and_bad_params():
    with pytest.raises(ArchsepError, match="^gamma:"):
        make_task("nearest-neighbour", N=40, d=2, gamma=1.5).sample(4, gen())
    with pytest.raises(ArchsepError, match="^N:"):
        make_task("nearest-neighbour", N=7, mqar=True)
    with pytest.raises(ArchsepError, match="^noise:"):
        make_task("nearest-neighbour", vectors="sign", noise=0.7)
    with pytest.raises(ArchsepError, match="^d:"):
        make_task("nearest-neighbour", d=0)


# --- every paper-A task runs through the shared loss / metric --------------------------------
@pytest.mark.parametrize("name,params", [("index-lookup", {"N": 12}), ("dyck", {"N": 12}),
                                         ("equality", {"N": 12}), ("nearest-neighbour", {"N": 12})])
def test_loss_and_metric_at_chance(name, params):
    t = make_task(name, **params)
    b = t.sample_test(256, gen())
    pred = torch.zeros(*b.x.shape[:2], t.spec.output_dim)
    assert t.loss(pred, b).item() == pytest.approx(torch.log(torch.tensor(float(t.spec.output_dim))).item(), rel=1e-5)
    assert 0 <= t.metric(pred, b).item() <= 1
    assert t.kind == "classification"
