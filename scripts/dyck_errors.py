"""Which Dyck examples a trained model gets wrong: trains one run of a Dyck sweep file's first
configuration (its own seeds, AdamW as the engine's, `--steps` steps, no evaluation), then
classifies `--n` fresh examples (seeded) and prints its error on positives, on the negatives the
type-blind depth counter accepts (corruptions that are type swaps only) and on the others, with a
few of the strings it gets wrong. A calibration's reading aid: the engine's curves say how much a
model misses, this says what.

    .venv/bin/python scripts/dyck_errors.py docs/results/dyck-controls/sweep-tf256.toml --steps 2500 \\
        [--set train.lr=1e-4 --set model_params.heads=4]
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

from archsep.engine.stack import make_optimizer
from archsep.engine.train import Stream
from archsep.errors import ArchsepError
from archsep.sweeps.file import load_file
from archsep.tasks.dyck import decode, depth_counter_accepts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", help="a sweep file of the dyck task; its first run matching every --set is trained")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--n", type=int, default=20000, help="fresh examples classified (default 20000)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="pick the run whose FIELD (dotted, e.g. train.lr) is VALUE (a JSON number or string)")
    a = ap.parse_args()
    try:
        configs = load_file(a.sweep).configs
        want = [(k, json.loads(v)) for k, v in (s.split("=", 1) for s in a.set)]
    except (ArchsepError, ValueError) as e:
        print(f"archsep: {e}", file=sys.stderr)
        return 2

    def field(cfg, dotted: str):
        x = cfg.to_dict()
        for part in dotted.split("."):
            x = x.get(part) if isinstance(x, dict) else None
        return x

    cfg = next((c for c in configs if all(field(c, k) == v for k, v in want)), None)
    if cfg is None or cfg.task != "dyck":
        print(f"archsep: --set: no dyck run of {a.sweep} has {a.set}", file=sys.stderr)
        return 2
    task = cfg.build_task()
    model = cfg.build_model(task)
    model.prune_to_readout()
    opt = make_optimizer(list(model.parameters()), cfg.train.lr, cfg.train.weight_decay)
    data = Stream(cfg, task, torch.device("cpu"))
    for _ in range(a.steps):  # sample -> forward -> loss -> backward -> step
        b = data.next()
        loss = task.loss(model(b.x).float(), b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        b = task.sample(a.n, torch.Generator().manual_seed(cfg.derived_seed("errors")))
        pred = model(b.x).float()
        pred = pred[:, -1] if pred.dim() == 3 else pred  # (n, 2): the last position's logits
        y = b.y.view(-1)
        wrong = pred.argmax(-1) != y
        blind = depth_counter_accepts(b.x)
    print(f"{cfg.label} {json.dumps(cfg.model_params, sort_keys=True)} lr={cfg.train.lr:g} N={task.spec.seq_len} "
          f"after {a.steps} steps: error {wrong.float().mean():.4f} on {a.n} fresh examples")
    neg = y == 0
    for name, m in (("positives", ~neg), ("negatives the depth counter accepts (type swaps only)", neg & blind),
                    ("negatives the depth counter rejects", neg & ~blind)):
        print(f"  {name}: {int(m.sum())}, error {wrong[m].float().mean():.4f}")
    for i in (wrong & neg).nonzero().view(-1)[:8].tolist():
        print(f"  wrong negative  {decode(b.x[i])}")
    for i in (wrong & ~neg).nonzero().view(-1)[:4].tolist():
        print(f"  wrong positive  {decode(b.x[i])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
