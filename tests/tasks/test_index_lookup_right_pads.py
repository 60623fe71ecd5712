"""Index lookup's train_lengths = "per-example-right" (issue 52's per-example diagnostic without
the shift): one k per example, the query at position k, pads after it, the label read at the
query (readout "mask"). Checked against a per-example oracle, against a causal model's outputs
on the same examples without pads, and through the engine. Every draw is seeded."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from archsep.config import RunConfig, TrainConfig
from archsep.engine.train import train_run
from archsep.models import MODELS
from archsep.tasks import make_task
from archsep.tasks.base import TaskSpec


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_each_row_is_symbols_query_then_pads_and_the_label_sits_at_the_query():
    t = make_task("index-lookup", N=20, vocab=16, train_lengths="per-example-right")
    b = t.sample(1000, gen(0))
    assert b.x.shape == b.y.shape == b.mask.shape == (1000, 21)
    ks = Counter()
    for row, y, m, p in zip(b.x.tolist(), b.y.tolist(), b.mask.tolist(), b.tuples.squeeze(1).tolist()):
        k = next(i for i, v in enumerate(row) if v >= t.vocab)  # the first non-symbol: the query
        assert all(0 <= v < t.vocab for v in row[:k])
        assert row[k] == t.vocab + p and 0 <= p < k
        assert all(v == t.pad for v in row[k + 1:])
        assert m == [i == k for i in range(21)]  # the query's position alone is read
        assert y[k] == row[p]  # s_p, at position p - 1 (1-based p) whatever k is
        ks[k] += 1
    assert set(ks) == set(range(10, 21))  # k uniform over {10..20}, several values in one batch
    assert max(ks.values()) < 2 * min(ks.values()) + 40


def test_spec_reads_the_mask_and_the_test_set_is_the_variable_forms_at_k_equal_N():
    t = make_task("index-lookup", N=20, train_lengths="per-example-right")
    v = make_task("index-lookup", N=20)
    assert t.spec == TaskSpec("tokens", 64 + 20 + 1, 21, 64, "mask")
    assert not t.fixed_shapes
    a, b = t.sample_test(300, gen(1)), v.sample_test(300, gen(1))
    assert torch.equal(a.x, b.x) and not (a.x == t.pad).any()
    assert a.mask[:, -1].all() and not a.mask[:, :-1].any()
    assert torch.equal(a.y[:, -1], b.y)
    # the same examples, so the same baselines (sequence-mode read at the mask)
    assert t.trivial_baselines(2000, gen(2)) == v.trivial_baselines(2000, gen(2))
    assert t.best_trivial(2000, gen(2))[0] == "sequence-mode"


def test_reproducible_from_the_generator_alone():
    t = make_task("index-lookup", N=20, train_lengths="per-example-right")
    before = torch.get_rng_state()
    a, b = t.sample(64, gen(9)), t.sample(64, gen(9))
    assert torch.equal(before, torch.get_rng_state())
    assert all(torch.equal(u, w) for u, w in ((a.x, b.x), (a.y, b.y), (a.mask, b.mask)))
    assert not torch.equal(a.x, t.sample(64, gen(10)).x)


@pytest.mark.parametrize("arch, params", [
    ("tf-preln", {"layers": 1, "width": 32, "heads": 1, "positions": "learned", "causal": True}),
    ("lstm", {"hidden": 16, "positions": "learned"}),
    ("mamba", {"width": 16, "positions": "learned"}),
])
def test_a_causal_model_reads_at_the_query_what_it_reads_without_the_pads(arch, params):
    """The pads come after the query: a causal model's output there is its output on the same
    example unpadded (one k per batch's form), so "per-example-right" changes only which ks share
    a batch."""
    t = make_task("index-lookup", N=20, train_lengths="per-example-right")
    torch.manual_seed(0)
    model = MODELS.get(arch)(**params).build(t.spec).eval()
    b = t.sample(32, gen(3))
    with torch.no_grad():
        out = model(b.x)                                   # (B, N+1, vocab)
        for i in range(32):
            k = int(b.mask[i].nonzero())
            alone = model(b.x[i: i + 1, : k + 1])[0, -1]   # s_1..s_k and the query, no pads
            assert torch.allclose(out[i, k], alone, atol=1e-5), (arch, i, k)


def test_trains_through_the_engine_and_learns_a_short_lookup():
    cfg = RunConfig("index-lookup", "tf-preln", {"N": 6, "vocab": 8, "min_length": 3,
                                                 "train_lengths": "per-example-right"},
                    {"layers": 1, "width": 32, "heads": 1, "positions": "learned", "causal": True},
                    TrainConfig(budget=64 * 1500, lr=3e-3, threshold=0.05, eval_every=50, eval_size=500,
                                test_size=500, weight_decay=0.0), seed=0)
    r = train_run(cfg)
    assert r.status == "ok", (r.status, r.error, r.curve[-3:])
    assert r.curve[-1][1] < 0.05 and r.test_metric is not None and r.test_metric < 0.1
    assert r.train_curve[0][1] > 0.3 > 0.05 > r.train_curve[-1][1]  # the training error at the mask
