"""Index lookup's training lengths: train_lengths = "per-example" (one k per example, left pads
with one pad token, the query last) against "variable" (one k per batch) and "fixed" (k = N), and
the sequence-mode baseline's indifference to pads. Every draw is seeded."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from archsep.config import RunConfig
from archsep.errors import ArchsepError
from archsep.tasks import make_task
from archsep.tasks.base import TaskSpec
from archsep.tasks.index_lookup import IndexLookup


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def strip(row: list[int], pad: int) -> list[int]:
    """One example's symbols s_1..s_k: the row without its query and its leading pads."""
    body = row[:-1]
    n = 0
    while n < len(body) and body[n] == pad:
        n += 1
    return body[n:]


def test_per_example_lengths_differ_within_one_batch():
    t = make_task("index-lookup", N=20, train_lengths="per-example")
    b = t.sample(256, gen(0))
    assert b.x.shape == (256, 21)  # always N + 1: the batch is padded to N symbols
    pads = (b.x[:, :-1] == t.pad).sum(1)
    k = 20 - pads
    # k uniform over {10..20}: 11 values, each expected ~23 times in 256 examples
    assert len(set(k.tolist())) == 11
    assert int(k.min()) == 10 and int(k.max()) == 20
    counts = Counter(k.tolist())
    assert max(counts.values()) < 50 and min(counts.values()) > 5


def test_per_example_min_length_is_clipped_to_N():
    t = make_task("index-lookup", N=6, train_lengths="per-example")  # min_length 10 > N
    b = t.sample(400, gen(1))
    k = 6 - (b.x[:, :-1] == t.pad).sum(1)
    assert set(k.tolist()) == {6}  # only k = N
    t = make_task("index-lookup", N=8, train_lengths="per-example", min_length=3)
    k = 8 - (t.sample(2000, gen(1)).x[:, :-1] == t.pad).sum(1)
    assert set(k.tolist()) == set(range(3, 9))


def test_per_example_label_is_the_queried_symbol_after_the_pads():
    t = make_task("index-lookup", N=20, vocab=16, train_lengths="per-example")
    b = t.sample(1000, gen(2))
    queried = set()
    for row, y, p in zip(b.x.tolist(), b.y.tolist(), b.tuples.squeeze(1).tolist()):
        s = strip(row, t.pad)
        assert row[-1] == t.vocab + p  # the query names p (0-based) and sits last
        assert 0 <= p < len(s)
        assert all(0 <= v < t.vocab for v in s)  # after the pads: symbols only
        assert y == s[p]
        queried.add((len(s), p))
    # every (k, p) with p < k is possible; many of them appear
    assert len(queried) > 100


def test_per_example_pads_are_only_on_the_left():
    t = make_task("index-lookup", N=20, train_lengths="per-example")
    x = t.sample(512, gen(3)).x
    is_pad = x == t.pad
    assert not is_pad[:, -1].any()  # the query is never a pad
    # along each row: pads, then none: a pad never follows a non-pad
    assert not (is_pad[:, 1:] & ~is_pad[:, :-1]).any()
    assert not is_pad[:, -11:].any()  # at least min_length = 10 symbols, then the query
    assert ((x[:, :-1] < t.vocab) | is_pad[:, :-1]).all()  # before the query: symbols or pads


def test_per_example_is_reproducible_from_the_generator():
    t = make_task("index-lookup", N=20, train_lengths="per-example")
    a, b = t.sample(64, gen(9)), t.sample(64, gen(9))
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y) and torch.equal(a.tuples, b.tuples)
    c = t.sample(64, gen(10))
    assert not torch.equal(a.x, c.x)
    before = torch.get_rng_state()
    t.sample(64, gen(9))
    assert torch.equal(before, torch.get_rng_state())  # nothing from the global RNG


def test_per_example_spec_adds_one_pad_id_and_test_has_no_pads():
    t = make_task("index-lookup", N=20, train_lengths="per-example")
    assert t.pad == 64 + 20
    assert t.spec == TaskSpec("tokens", 64 + 20 + 1, 21, 64, "last")
    assert int(t.sample(256, gen(4)).x.max()) == t.pad < t.spec.input_dim
    b = t.sample_test(256, gen(4))
    assert b.x.shape == (256, 21) and not (b.x == t.pad).any()
    assert not t.fixed_shapes


@pytest.mark.parametrize("lengths,fixed", [("variable", False), ("fixed", True)])
def test_variable_and_fixed_keep_their_spec(lengths, fixed):
    t = make_task("index-lookup", N=20, train_lengths=lengths)
    assert t.spec == TaskSpec("tokens", 64 + 20, 21, 64, "last")
    assert t.fixed_shapes is fixed
    x = t.sample(256, gen(5)).x
    assert int(x.max()) < 64 + 20  # no pad id
    assert (x[:, :-1] < 64).all()


def test_variable_and_fixed_run_ids_are_unchanged():
    """The ids of two stored runs (docs/results/lookup-diagnostics/runs.csv: LSTM-64 at N = 20,
    lr 1e-3, variable and fixed lengths) are unchanged by the third value."""
    train = {"budget": 512000, "threshold": 0.01, "eval_every": 250, "eval_size": 1000, "test_size": 2000,
             "eval_mode": "every", "keep_best": True, "weight_decay": 0.0, "batch_size": 64, "lr": 1e-3}
    ids = {}
    for lengths in ("variable", "fixed"):
        cfg = RunConfig.from_dict({"task": "index-lookup", "arch": "lstm", "label": "LSTM-64",
                                   "model_params": {"layers": 1, "hidden": 64},
                                   "task_params": {"N": 20, "train_lengths": lengths}, "train": train})
        ids[lengths] = cfg.run_id
    assert ids == {"variable": "e0dbf67b9b62d5d9", "fixed": "cf1c93ee5908a9ec"}


def test_bad_train_lengths_lists_every_value():
    with pytest.raises(ArchsepError, match="train_lengths") as e:
        IndexLookup(train_lengths="sometimes")  # type: ignore[arg-type]
    msg = str(e.value)
    assert all(f"'{v}'" in msg for v in ("variable", "fixed", "per-example", "per-example-right"))
    with pytest.raises(ArchsepError, match="train_lengths"):
        make_task("index-lookup", train_lengths="per_example")


def test_sequence_mode_ignores_pads():
    vocab, N = 4, 6
    pad = vocab + N
    x = torch.tensor([
        [pad, pad, pad, 1, 2, 1, vocab + 0],  # pads outnumber every symbol: the mode is 1
        [pad, pad, 3, 3, 0, 0, vocab + 2],  # a tie 3/0: the smaller id, 0
        [2, 2, 2, 3, 1, 0, vocab + 5],  # no pads: 2
        [pad, pad, pad, pad, pad, 3, vocab + 0],  # one symbol: 3
    ])
    assert IndexLookup.sequence_mode(x, vocab).tolist() == [1, 0, 2, 3]


def test_sequence_mode_on_per_example_batches_is_the_oracle():
    t = make_task("index-lookup", N=20, vocab=8, train_lengths="per-example")
    b = t.sample(300, gen(6))
    want = []
    for row in b.x.tolist():
        c = Counter(strip(row, t.pad))
        top = max(c.values())
        want.append(min(s for s, n in c.items() if n == top))
    assert IndexLookup.sequence_mode(b.x, t.vocab).tolist() == want
