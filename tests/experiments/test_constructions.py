"""The hand-set constructions are exact (or within their stated error) at moderate N."""
from __future__ import annotations

import csv

import pytest
import torch

from archsep.cli import main
from archsep.constructions import CONSTRUCTIONS
from archsep.constructions import dyck as dy
from archsep.constructions import lookup as lk
from archsep.constructions import qstr as qc
from archsep.constructions.equality import EqualityTransformer
from archsep.constructions.nearest import NNTransformer
from archsep.tasks.dyck import Dyck, brute_force_member, decode
from archsep.tasks.equality import Equality
from archsep.tasks.nearest_neighbour import NearestNeighbour
from archsep.tasks.qstr import QSTR


def test_registry_names():
    assert set(CONSTRUCTIONS.names()) >= {"qstr", "lookup", "dyck-rnn", "equality", "nearest-neighbour"}


# --- paper B, Lemma 11 ---------------------------------------------------------------------
def test_qstr_chunked_forward_is_the_model():
    task = QSTR(N=12, q=2, d=4, link="linear", seed=3)
    m = qc.build(task, 5.0)
    b = task.sample(3, torch.Generator().manual_seed(0))
    full = m(b.x).squeeze(-1).detach()
    assert torch.allclose(qc.forward_rows(m, b.x, torch.arange(12), chunk=5), full, atol=1e-6)


def test_qstr_weights_sit_in_the_block():
    task = QSTR(N=30, q=3, d=5, seed=1)
    m = qc.build(task, 10.0)
    mask = qc.block_mask(task)
    assert (m.wqk[~mask] == 0).all()
    assert torch.equal(m.wqk[0][mask[0]].view(task.d_e, task.d_e), 10.0 * torch.eye(task.d_e))


def test_qstr_linear_exact_and_mse_falls_with_alpha():
    task = QSTR(N=300, q=2, d=10, link="linear", seed=0)
    m = qc.build(task, 64.0)
    assert qc.evaluate(task, m, 0, labels=2000)["mse"] < 1e-10
    mses = []
    for a in (2.0, 8.0, 32.0):
        qc.set_attention(m, task, a)
        mses.append(qc.evaluate(task, m, 0, labels=2000)["mse"])
    assert mses[0] > mses[1] > mses[2]
    assert mses[0] > 0.5


def test_qstr_nonlinear_readout_within_stated_error():
    for link, bound in (("hermite2", 1e-3), ("norm2", 5e-3)):
        task = QSTR(N=64, q=2, d=6, link=link, seed=0)
        m = qc.build(task, 64.0, mlp_width=300, fit_samples=8000)
        assert qc.evaluate(task, m, 0, labels=2000)["mse"] < bound, link


# --- paper A, Theorem 1 --------------------------------------------------------------------
def test_lookup_min_width_is_exact_at_every_position():
    N = 300
    k = lk.min_width(N, seed=0)
    base = lk.code_matrix(N, 0)
    m = lk.LookupTransformer(N, k, base_codes=base)
    assert lk.certified(m)[0]
    assert not lk.certified(lk.LookupTransformer(N, k - 1, base_codes=base))[0]
    s = torch.randint(0, 64, (N,), generator=torch.Generator().manual_seed(1))
    pred, mass = m.all_queries(s, chunk=64)
    assert torch.equal(pred, s) and (mass > 0.5).all()
    from archsep.tasks.index_lookup import IndexLookup

    b = IndexLookup(N=N).sample_test(32, torch.Generator().manual_seed(2))
    assert (m.forward(b.x).argmax(-1) == b.y).all()


# --- Dyck-(2,2) RNN ------------------------------------------------------------------------
def test_dyck_rnn_equals_the_dfa():
    model = dy.build()
    proof = dy.reachability_proof(model)
    assert proof["ok"] and proof["vectors"] == dy.HIDDEN + 1  # start, 12 transitions, dead
    assert dy.count_accepted(proof, 16) == 2**15
    x = dy.all_strings(6)
    ref = torch.tensor([brute_force_member(decode(s)) for s in x]).long()
    assert torch.equal(dy.predict(model, x), ref)
    b = Dyck(N=1000).sample(32, torch.Generator().manual_seed(0))
    assert torch.equal(dy.predict(model, b.x), b.y)


# --- paper A, Theorems 6 and 7 -------------------------------------------------------------
@pytest.mark.parametrize("variant", ["eq-random", "eq-one"])
def test_equality_two_layers_exact(variant):
    task = Equality(N=400, variant=variant)
    m = EqualityTransformer(400, task.vocab)
    b = task.sample_test(48, torch.Generator().manual_seed(0))
    logits, avg = m.forward(b.x, task.sep)
    assert torch.equal(logits.argmax(-1), b.y)
    assert float(avg[b.y == 1].max()) < 1 / 400 < float(avg[b.y == 0].min())


def test_nearest_neighbour_two_layers_exact():
    task = NearestNeighbour(N=400, d=32, gamma=0.02, noise=1.0)
    b = task.sample(4, torch.Generator().manual_seed(0))
    m = NNTransformer(task.m, 32, gamma_design=0.02)
    y = b.y[:, 2 * task.m:]
    assert torch.equal(m.forward(b.x).argmax(-1), y)


# --- CLI -----------------------------------------------------------------------------------
def test_construct_cli_writes_table_and_figure(tmp_path, capsys):
    assert main(["construct", "lookup", "--N", "10", "30", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader((tmp_path / "lookup.csv").open()))
    assert [r["N"] for r in rows] == ["10", "30"]
    assert all(r["accuracy_all_positions"] == "1.0" for r in rows)
    assert (tmp_path / "lookup.png").exists()
    assert "k_min" in capsys.readouterr().out


def test_construct_cli_unknown_name(capsys):
    assert main(["construct", "nope"]) == 2
    assert "construction" in capsys.readouterr().err
