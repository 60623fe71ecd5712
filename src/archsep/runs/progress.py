"""The progress bar of one call of the runner: it advances by each run's modelled share of the
work (`runs.cost.progress_weights`), not by one per run, and shows an ETA only once it can mean
something."""
from __future__ import annotations

import sys

from tqdm import tqdm

from ..results import RunResult

SHOW_ETA = 0.1  # the share of the modelled work finished before the bar shows an ETA


class Progress:
    """`done(result)` once per finished run, `close()` at the end. No ETA from the first run or
    two alone (one run that stopped early says little of the rest): the bar moves once more runs
    than workers have finished and they hold at least SHOW_ETA of the modelled work (the longest
    batches start first and are still running when the first cheap ones finish: a rate from
    those alone promised twice the wall time)."""

    def __init__(self, desc: str, weights: dict[str, float], workers: int, enabled: bool = True):
        self.weights = weights
        self.runs = len(weights)
        self.warm = min(self.runs, max(3, workers + 1))
        self.finished = self.failures = 0
        self.held_back = 0.0
        self.bar = tqdm(total=sum(weights.values()) or 1.0, desc=desc, disable=not enabled, file=sys.stderr,
                        dynamic_ncols=True, smoothing=0.0,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix} [{elapsed}<{remaining}]")
        self.bar.set_postfix_str(f"0/{self.runs} runs", refresh=False)

    def write(self, text: str) -> None:
        self.bar.write(text, file=sys.stderr)

    def done(self, r: RunResult) -> None:
        self.finished += 1
        self.failures += r.status in ("error", "diverged")
        label = r.config.get("label") or r.config["arch"]
        self.bar.set_postfix_str(f"{self.finished}/{self.runs} runs, failed={self.failures}, last: {label} "
                                 f"N={r.config['task_params'].get('N', '?')} {r.status} samples={r.samples}",
                                 refresh=False)
        self.held_back += self.weights.get(r.run_id, 0.0)
        bar = self.bar
        if self.finished >= self.warm and bar.n + self.held_back >= SHOW_ETA * bar.total:
            # (summed floats may pass the total by a rounding error)
            bar.update(max(0.0, min(self.held_back, bar.total - bar.n)))
            self.held_back = 0.0

    def close(self) -> None:
        self.bar.close()
