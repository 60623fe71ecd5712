"""Side-by-side step timing shared by the benchmarks: variants alternate step by step on the
same batches, so a shared machine's load falls on each alike."""
from __future__ import annotations

import time

from archsep.engine.stack import make_optimizer


def alternate_steps(models: dict, task, batches: list, warmup: int) -> dict[str, list[float]]:
    """Seconds per training step (zero_grad, forward, loss, backward, AdamW step) of each model
    on every batch after the first `warmup`, the models taking turns on each batch."""
    opts = {k: make_optimizer(list(m.parameters()), 1e-3, 0.0) for k, m in models.items()}
    times: dict[str, list[float]] = {k: [] for k in models}
    for i, b in enumerate(batches):
        for k, m in models.items():
            t = time.perf_counter()
            opts[k].zero_grad(set_to_none=True)
            task.loss(m(b.x), b).backward()
            opts[k].step()
            if i >= warmup:
                times[k].append(time.perf_counter() - t)
    return times
