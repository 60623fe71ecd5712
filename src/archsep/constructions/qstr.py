"""Paper B, Lemma 11 / Eq. A.2: a one-layer, q-head paper-B Transformer for qSTR with hand-set
weights.

Head h: W_QK has one nonzero block alpha*I, rows = the query's pointer slot w_{t_ih}, columns =
the key's own-code slot w_j, so score_ij = alpha <w_{t_ih}, w_j>: alpha for j = t_ih and at
most alpha (1 - 2/d_e) otherwise (the codes are distinct). W_V copies x_j. The MLP reads the q
retrieved tokens: exactly for the linear link (ReLU(z) - ReLU(-z)), by a least-squares fit of
the output layer over seeded random ReLU features of width m for nonlinear links.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import torch

from ..analysis.attention import block_mass
from ..models.transformer_b import TransformerB, TransformerBConfig
from ..tasks.qstr import QSTR
from .base import CONSTRUCTIONS, Construction


def slots(task: QSTR) -> dict:
    """Index ranges of the input layout [x_i, w_i, w_{t_i1}, ..., w_{t_iq}]."""
    d, de = task.d, task.d_e
    return {"x": (0, d), "own": (d, d + de),
            "pointer": [(d + (1 + h) * de, d + (2 + h) * de) for h in range(task.q)]}


def block_mask(task: QSTR) -> torch.Tensor:
    """(q, D, D) bool: the theoretical W_QK support of every head (query pointer h x key code)."""
    s = slots(task)
    D = task.spec.input_dim
    m = torch.zeros(task.q, D, D, dtype=torch.bool)
    o0, o1 = s["own"]
    for h, (p0, p1) in enumerate(s["pointer"]):
        m[h, p0:p1, o0:o1] = True
    return m


def set_attention(model: TransformerB, task: QSTR, alpha: float) -> None:
    """Eq. A.2 on a joint-W_QK model with H >= q heads (extra heads stay zero)."""
    s = slots(task)
    o0, o1 = s["own"]
    x0, x1 = s["x"]
    de = task.d_e
    code_gain = math.sqrt(task.d / task.q) ** 2 if task.code_scale else 1.0  # both sides scaled
    with torch.no_grad():
        model.wqk.zero_()
        model.wv.zero_()
        for h, (p0, p1) in enumerate(s["pointer"]):
            model.wqk[h, p0:p1, o0:o1] = (alpha / code_gain) * torch.eye(de)
            model.wv[h, x0:x1, x0:x1] = torch.eye(x1 - x0)


def retrieved_coords(task: QSTR, heads: int) -> list[int]:
    """Columns of the MLP input holding head h's copy of x_{t_ih}, h-major."""
    D = task.spec.input_dim
    return [h * D + c for h in range(task.q) for c in range(task.d)]


def build(task: QSTR, alpha: float, mlp_width: int = 1000, seed: int = 0, fit_samples: int = 40_000,
          ridge: float = 1e-6) -> TransformerB:
    """The Lemma-11 model for `task`. Linear link: width 2, exact. Otherwise: width `mlp_width`,
    random ReLU features of the q retrieved tokens, output layer fitted on exact retrievals."""
    q = task.q
    linear = task.link == "linear"
    width = 2 if linear else mlp_width
    model = TransformerBConfig(heads=q, mlp_width=width, qk="joint").build(task.spec)
    set_attention(model, task, alpha)
    cols = retrieved_coords(task, q)
    W: torch.Tensor = model.mlp[0].weight  # type: ignore[assignment]  # nn.Sequential items are Modules to mypy
    with torch.no_grad():
        W.zero_()
        model.mlp[0].bias.zero_()  # type: ignore[operator]
        if linear:  # g = <u, r>/sqrt q = ReLU(g) - ReLU(-g)
            u = task.g.u.flatten() / math.sqrt(q)  # type: ignore[attr-defined]
            W[0, cols] = u
            W[1, cols] = -u
            model.mlp[2].weight.copy_(torch.tensor([[1.0, -1.0]]))  # type: ignore[operator]
            model.mlp[2].bias.zero_()  # type: ignore[operator]
        else:
            w, b, a, c = fit_readout(task, width, seed, fit_samples, ridge)
            r = w.shape[0]  # units in use (<= width); the rest stay zero
            W[:r, cols] = w
            model.mlp[0].bias[:r] = b  # type: ignore[operator]
            model.mlp[2].weight.zero_()  # type: ignore[operator]
            model.mlp[2].weight[0, :r] = a  # type: ignore[operator]
            model.mlp[2].bias.fill_(c)  # type: ignore[operator]
    return model


_FITS: dict = {}


def fit_readout(task: QSTR, width: int, seed: int, fit_samples: int = 40_000, ridge: float = 1e-6):
    """First layer w (width, q*d), b and a ridge least-squares output layer a, c fitted on exact
    retrievals (i.i.d. Gaussian tokens).

    hermite2 depends on token h only through z_h = <u_h, x_h>, so its features are random ReLUs
    of z (w = w~ (x) u_h, the link's own directions, as in paper B's Assumption 2), fitted once
    in z-space and valid for every N. norm2 is a sum over coordinates of x^2 - 1, so its
    features are width/(q d) random ReLUs of each coordinate, sharing one fitted output per
    feature. Other links get random ReLU features of the raw tokens."""
    q, d = task.q, task.d
    proj = task.link == "hermite2"
    ident = None if task.link in ("norm2", "hermite2") else (task.N, task.seed, tuple(getattr(task.g, "u",
                                                                                              torch.zeros(1)).flatten().tolist()))
    key = (task.link, q, d, ident, width, seed, fit_samples, ridge)
    if task.link == "norm2" and width >= q * d:
        return _separable_norm2(q, d, width // (q * d), seed, fit_samples, ridge)
    if key not in _FITS:
        gen = torch.Generator().manual_seed(seed)
        fan = q if proj else q * d
        w = torch.randn(width, fan, generator=gen) / math.sqrt(fan)
        b = torch.randn(width, generator=gen) * 0.5
        r = torch.randn(fit_samples, q, d, generator=gen)
        if proj:  # tokens z_h u_h: the link sees exactly z
            z = torch.randn(fit_samples, q, generator=gen)
            y, inp = task.g(z.unsqueeze(-1) * task.g.u).double(), z  # type: ignore[attr-defined]
        else:
            y, inp = task.g(r).double(), r.flatten(1)
        phi = torch.relu(inp @ w.T + b).double()
        phi = torch.cat([phi, torch.ones(fit_samples, 1, dtype=torch.float64)], 1)
        A = phi.T @ phi + ridge * fit_samples * torch.eye(width + 1, dtype=torch.float64)
        coef = torch.linalg.solve(A, phi.T @ y).float()
        _FITS.clear()  # keep one fit: they are large
        _FITS[key] = (w, b, coef[:-1], float(coef[-1]))
    w, b, a, c = _FITS[key]
    if proj:  # lift w~ (width, q) to (width, q*d) along this task's directions
        w = (w.unsqueeze(-1) * task.g.u.unsqueeze(0)).flatten(1)  # type: ignore[attr-defined]
    return w, b, a, c


def _separable_norm2(q: int, d: int, m1: int, seed: int, fit_samples: int, ridge: float):
    """norm2 = sum_j (x_j^2 - 1) / sqrt(2 q d) over the q*d retrieved coordinates: fit
    x^2 - 1 ~ sum_i a_i ReLU(w_i x + b_i) once, then give every coordinate its own copy of the
    m1 units (width m1 * q * d; unused units, if any, stay zero)."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(m1, generator=gen)
    b = torch.randn(m1, generator=gen) * 1.5
    x = torch.randn(fit_samples, generator=gen).double()
    phi = torch.cat([torch.relu(x[:, None] * w.double() + b.double()), torch.ones(fit_samples, 1,
                                                                                  dtype=torch.float64)], 1)
    A = phi.T @ phi + ridge * fit_samples * torch.eye(m1 + 1, dtype=torch.float64)
    coef = torch.linalg.solve(A, phi.T @ (x * x - 1))
    n = q * d
    W = torch.zeros(m1 * n, n)
    for j in range(n):  # unit i*n + j reads coordinate j
        W[torch.arange(m1) * n + j, j] = w
    scale = 1 / math.sqrt(2 * q * d)
    a = (coef[:-1].float() * scale).repeat_interleave(n)
    return W, b.repeat_interleave(n), a, float(coef[-1]) * n * scale


@torch.no_grad()
def forward_rows(model: TransformerB, z: torch.Tensor, rows: torch.Tensor, chunk: int = 256
                 ) -> torch.Tensor:
    """model(z)[:, rows, 0], (B, R), computed in query chunks: never an L x L score matrix,
    which at N = 10^4 would be 400 MB per head."""
    v = torch.einsum("bjd,hde->bhje", z, model.wv)  # (B, H, L, D)
    kt = z.transpose(1, 2).unsqueeze(1)  # (B, 1, D, L)
    outs = []
    for s in range(0, len(rows), chunk):
        zq = z[:, rows[s:s + chunk]]
        a = torch.softmax(torch.einsum("bid,hde->bhie", zq, model.wqk) @ kt, dim=-1)
        heads = (a @ v).permute(0, 2, 1, 3).flatten(2)
        outs.append(model.mlp(heads).squeeze(-1))
    return torch.cat(outs, 1)


@torch.no_grad()
def target_mass(model: TransformerB, z: torch.Tensor, t: torch.Tensor, rows: torch.Tensor,
                chunk: int = 256) -> torch.Tensor:
    """Attention weight head h puts on its target t_ih, (B, R, q)."""
    kt = z.transpose(1, 2).unsqueeze(1)
    q = t.shape[-1]
    out = []
    for s in range(0, len(rows), chunk):
        r = rows[s:s + chunk]
        a = torch.softmax(torch.einsum("bid,hde->bhie", z[:, r], model.wqk[:q]) @ kt, dim=-1)
        idx = t[:, r].permute(0, 2, 1).unsqueeze(-1)  # (B, q, R, 1)
        out.append(torch.gather(a, -1, idx).squeeze(-1).permute(0, 2, 1))
    return torch.cat(out, 1)


def evaluate(task: QSTR, model: TransformerB, seed: int, labels: int = 4000, max_rows: int = 1000) -> dict:
    """MSE of the construction on fresh prompts, at up to `max_rows` query positions per prompt
    (every key position is attended over), plus the worst and mean off-target attention."""
    gen = torch.Generator().manual_seed(seed + 1)
    R = min(task.N, max_rows)
    n = max(1, math.ceil(labels / R))
    batch = task.sample(n, gen)
    rows = torch.arange(task.N) if R == task.N else torch.randperm(task.N, generator=gen)[:R]
    pred = forward_rows(model, batch.x, rows)
    y = batch.y[:, rows]
    assert batch.tuples is not None  # qSTR batches carry their index tuples
    mass = target_mass(model, batch.x, batch.tuples, rows)
    return {"mse": float(((pred - y) ** 2).mean()), "labels": int(y.numel()),
            "max_leak": float(1 - mass.min()), "mean_leak": float(1 - mass.mean())}


@CONSTRUCTIONS.register("qstr")
class QSTRConstruction(Construction):
    description = "paper B Lemma 11 / Eq. A.2: q-head Transformer, W_QK = alpha*I block"
    default_Ns = (10, 100, 1000, 10_000)

    def __init__(self, q: int = 2, d: int = 10, links: Sequence[str] = ("linear", "norm2", "hermite2"),
                 alphas: Sequence[float] = (0.5, 1, 2, 4, 8, 16, 32, 64, 128), alpha: float = 64.0,
                 alpha_N: int = 1000, mlp_width: int = 1000):
        self.q, self.d, self.links, self.alphas = q, d, tuple(links), tuple(alphas)
        self.alpha, self.alpha_N, self.mlp_width = alpha, alpha_N, mlp_width

    def memory(self, N: int) -> float:
        # codes (N, d_e), the evaluation prompts (n, N, width) with n = ceil(4000 / min(N, 1000)),
        # the values (n, q, N, width) and one chunk of scores (n, q, 256, N), float32, x2 slack
        d_e = 5 * math.log(max(N, 2))
        width = 1 + self.d + (self.q + 1) * d_e
        n = math.ceil(4000 / min(N, 1000))
        return 2 * 4.0 * (N * d_e + n * N * width * (2 + self.q) + n * self.q * 256 * N)

    def _row(self, sweep: str, link: str, N: int, alpha: float, seed: int, cache: dict) -> dict:
        task = QSTR(N=N, q=self.q, d=self.d, link=link, seed=seed)
        key = (link, N)
        if key not in cache:  # the readout fit does not depend on alpha
            cache[key] = build(task, alpha, self.mlp_width, seed)
        model = cache[key]
        set_attention(model, task, alpha)
        ev = evaluate(task, model, seed)
        return {"sweep": sweep, "link": link, "N": N, "d_e": task.d_e, "alpha": alpha, "heads": self.q,
                "width": task.spec.input_dim,
                "mlp_width": model.mlp[0].out_features, "params": model.n_params(),
                "nonzero": int(sum((p != 0).sum() for p in model.parameters())), **ev}

    def run(self, Ns: Sequence[int], seed: int = 0) -> list[dict]:
        rows: list[dict] = []
        cache: dict = {}
        aN = self.alpha_N if self.alpha_N in Ns or not Ns else min(Ns, key=lambda n: abs(math.log(n / self.alpha_N)))
        for link in self.links:
            for a in self.alphas:
                rows.append(self._row("alpha", link, aN, a, seed, cache))
            cache.clear()
            for N in Ns:
                rows.append(self._row("N", link, N, self.alpha, seed, cache))
                cache.clear()
        return rows

    def plot(self, rows: list[dict], stem: Path) -> list[Path]:
        from ..reporting.plots import MARKERS, plt, save

        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for k, link in enumerate(dict.fromkeys(r["link"] for r in rows)):
            for ax, sweep, xkey in ((axes[0], "alpha", "alpha"), (axes[1], "N", "N")):
                pts = [r for r in rows if r["link"] == link and r["sweep"] == sweep]
                if pts:
                    ax.plot([r[xkey] for r in pts], [max(r["mse"], 1e-16) for r in pts],
                            marker=MARKERS[k % len(MARKERS)], label=link)
        aN = next((r["N"] for r in rows if r["sweep"] == "alpha"), "?")
        aval = next((r["alpha"] for r in rows if r["sweep"] == "N"), "?")
        for ax, xl, title in ((axes[0], "alpha", f"MSE vs alpha (N={aN})"),
                              (axes[1], "N", f"MSE vs N (alpha={aval}, d_e=floor(5 ln N))")):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(xl)
            ax.set_ylabel("test MSE")
            ax.set_title(title)
            ax.axhline(1.0, color="gray", ls=":", lw=1)
            ax.legend()
        return save(fig, stem)


def construction_block_mass(N: int = 100, alpha: float = 64.0) -> float:
    """The hand-set Lemma-11 model's block mass (1 by construction; a check of the metric)."""
    task = QSTR(N=N, q=1, d=10, link="linear")
    return block_mass(build(task, alpha).qk_matrix(), block_mask(task))
