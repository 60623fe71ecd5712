"""Properties of the qSTR generator (SPEC 1.1)."""
import math

import pytest
import torch

from archsep.config import RunConfig, TrainConfig
from archsep.errors import ArchsepError
from archsep.tasks import make_task
from archsep.tasks.qstr import code_dim, draw_tuples
from archsep.engine.evaluation import held_out_set


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("link", ["linear", "hermite2", "norm2", "relu-teacher"])
@pytest.mark.parametrize("q", [1, 3])
def test_links_are_normalised_to_unit_mse_of_zero(link, q):
    task = make_task("qstr", N=6, q=q, link=link, seed=3)
    y = task.sample(40_000, gen(1)).y
    mse_of_zero = float((y ** 2).mean())
    se = float((y ** 2).std()) / math.sqrt(y.numel() / 6)  # positions of one prompt are correlated
    assert abs(mse_of_zero - 1.0) < max(4 * se, 0.03), (link, q, mse_of_zero)
    assert abs(float(y.mean())) < 0.05
    assert float(y.var()) > 0.9  # labels really vary


@pytest.mark.parametrize("link", ["linear", "hermite2", "norm2", "relu-teacher"])
def test_label_depends_on_exactly_the_indexed_tokens(link):
    task = make_task("qstr", N=7, q=2, link=link, seed=0)
    b = task.sample(64, gen(2))
    x = b.x[..., : task.d].clone()
    t = b.tuples
    for pos in range(task.N):
        for j in range(task.N):
            x2 = x.clone()
            x2[:, j] += torch.randn(64, task.d, generator=gen(j))
            y2 = task.assemble(x2, t).y[:, pos]
            used = (t[:, pos] == j).any(-1)
            assert torch.allclose(y2[~used], b.y[~used, pos], atol=1e-5)
            assert (y2[used] - b.y[used, pos]).abs().min() > 1e-6 if used.any() else True


def test_input_layout_and_distinct_codes():
    task = make_task("qstr", N=12, q=2, d=5, seed=7)
    assert task.d_e == code_dim(12) == math.floor(5 * math.log(12))
    codes = task.codes
    assert torch.unique(codes, dim=0).shape[0] == 12
    assert torch.allclose(codes.abs(), torch.full_like(codes, 1 / math.sqrt(task.d_e)))
    b = task.sample(8, gen())
    de = task.d_e
    assert b.x.shape == (8, 12, 5 + 3 * de) == (8, 12, task.spec.input_dim)
    assert torch.allclose(b.x[..., 5:5 + de], codes.expand(8, 12, de))
    for h in range(2):
        assert torch.allclose(b.x[..., 5 + (h + 1) * de: 5 + (h + 2) * de], codes[b.tuples[..., h]])


def test_codes_are_redrawn_until_distinct_at_small_N():
    # N=3 has d_e=5: 32 codes, so collisions of 3 draws happen for some seeds; none may survive
    for seed in range(200):
        c = make_task("qstr", N=3, seed=seed).codes
        assert torch.unique(c, dim=0).shape[0] == 3


def test_tuples_without_replacement_are_distinct_and_uniform():
    t = draw_tuples((20000,), N=5, q=3, replace=False, generator=gen())
    assert all(len(set(row.tolist())) == 3 for row in t[:2000])
    counts = torch.bincount(t.flatten(), minlength=5).float() / t.numel()
    assert torch.allclose(counts, torch.full((5,), 0.2), atol=0.01)
    # every ordered position of the tuple is uniform too
    for h in range(3):
        c = torch.bincount(t[:, h], minlength=5).float() / len(t)
        assert torch.allclose(c, torch.full((5,), 0.2), atol=0.015)
    r = draw_tuples((20000,), N=5, q=3, replace=True, generator=gen())
    assert any(len(set(row.tolist())) < 3 for row in r[:200])


def test_simple_shares_one_tuple_and_full_does_not():
    simple = make_task("qstr", N=8, simple=True).sample(32, gen()).tuples
    assert (simple == simple[:, :1]).all()
    full = make_task("qstr", N=8).sample(32, gen()).tuples
    assert (full != full[:, :1]).any(dim=1).all()


def test_held_out_set_comes_from_the_training_distribution():
    """The authors evaluated 1STR on simple-1STR data; ours must not."""
    cfg = RunConfig("qstr", "tf-b", {"N": 8}, {}, TrainConfig(eval_size=256), seed=1)
    task = cfg.build_task()
    test = held_out_set(cfg, task)
    assert (test.tuples != test.tuples[:, :1]).any(dim=1).float().mean() > 0.99  # not simple
    train = task.sample(256, torch.Generator().manual_seed(cfg.derived_seed("train")))
    # same distribution: tuples uniform per position, labels of unit variance, same codes
    assert abs(float(test.y.var()) - float(train.y.var())) < 0.25
    assert torch.equal(test.x[0, :, 10:10 + task.d_e], train.x[0, :, 10:10 + task.d_e])
    simple_cfg = RunConfig("qstr", "tf-b", {"N": 8, "simple": True}, {}, TrainConfig(eval_size=64), seed=1)
    st = held_out_set(simple_cfg, simple_cfg.build_task())
    assert (st.tuples == st.tuples[:, :1]).all()


def test_same_seed_same_data_different_seed_different_data():
    a = make_task("qstr", N=4, seed=1).sample(4, gen(5))
    b = make_task("qstr", N=4, seed=1).sample(4, gen(5))
    c = make_task("qstr", N=4, seed=2).sample(4, gen(5))
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert not torch.equal(a.y, c.y)


@pytest.mark.parametrize("params, field", [
    ({"N": 0}, "N"), ({"N": 3, "q": 4}, "q"), ({"d": 0}, "d"), ({"q": 0}, "q"),
    ({"link": "cubic"}, "link"), ({"NN": 3}, "NN"), ({"N": 2.5}, "N"), ({"simple": "yes"}, "simple"),
])
def test_bad_parameters_name_the_field(params, field):
    with pytest.raises(ArchsepError, match=field):
        make_task("qstr", **params)


def test_the_prop3_distribution_is_the_one_the_few_heads_floor_is_proved_for():
    import torch

    from archsep.tasks import TASKS

    t = TASKS.build("qstr", N=20, q=2, d=10, link="norm2", distribution="prop3")
    b = t.sample(4000, torch.Generator().manual_seed(0))
    half = 10
    assert t.spec.readout == "mask" and bool(b.mask[:, half:].all()) and not bool(b.mask[:, :half].any())
    assert float(b.x[:, half:, :10].abs().max()) == 0.0  # the second half's tokens are 0
    assert bool((b.tuples[:, half:] == torch.tensor([0, 1])).all())  # and they all ask for t = (1, 2)
    assert bool((b.tuples[:, :half] < half).all())  # the first half retrieves first-half tokens
    y = b.y[b.mask]
    assert abs(float(y.var()) - 1) < 0.1 and abs(float(y.mean())) < 0.1  # unit variance: baseline MSE 1
    # the second half's label is one function of x_1, x_2, the same at every second-half position
    assert torch.allclose(b.y[:, half:], b.y[:, half:half + 1].expand(-1, half))
    assert "distribution" not in TASKS.build("qstr", N=8).params()  # old qstr runs keep their ids


def test_the_as_published_held_out_set_is_simple_qstr_and_only_for_qstr():
    import pytest

    from archsep.config import RunConfig, TrainConfig
    from archsep.engine.evaluation import held_out_set
    from archsep.errors import ArchsepError

    cfg = RunConfig("qstr", "tf-b", {"N": 6}, {}, TrainConfig(heldout="as-published"))
    task = cfg.build_task()
    b = held_out_set(cfg, task)
    assert bool((b.tuples == b.tuples[:, :1]).all())  # one tuple per prompt: the authors' test set
    ours = held_out_set(RunConfig("qstr", "tf-b", {"N": 6}, {}), task)
    assert not bool((ours.tuples == ours.tuples[:, :1]).all())
    with pytest.raises(ArchsepError, match="train.heldout"):
        RunConfig("dyck", "lstm", {"N": 4}, {}, TrainConfig(heldout="as-published"))


def test_the_pointer_blind_predictor_is_the_mean_over_every_tuple():
    """An additive link's shortcut (each head's mean over the positions) equals the mean of g
    over every tuple the task draws, with and without repetition."""
    import torch

    from archsep.tasks.links import Link
    from archsep.tasks.qstr import QSTR

    x = torch.randn(20, 5, 4, generator=torch.Generator().manual_seed(0))
    for link in ("linear", "hermite2"):
        for replace in (True, False):
            t = QSTR(N=5, q=3, d=4, link=link, replace=replace)
            M = 5 ** 3 if replace else 5 * 4 * 3
            assert t.tuples().shape == (M, 3)
            assert torch.allclose(t.g.blind(x, t.tuples()), Link.blind(t.g, x, t.tuples()), atol=1e-5)


def test_the_pointer_blind_mse_is_one_minus_one_over_n_for_one_quadratic_head():
    """q = 1, hermite2: E[y | tokens] = the mean of He2 over the N tokens, whose variance is
    1/N (independent tokens, Var He2 = 1): its MSE is 1 - 1/N in expectation."""
    import torch

    from archsep.tasks.qstr import QSTR

    task = QSTR(N=7, q=1, d=10, link="hermite2", replace=True)
    mse = task.pointer_blind_mse(40_000, torch.Generator().manual_seed(3))
    assert abs(mse - (1 - 1 / 7)) < 0.015
