"""What runs and experiments produce: a run's result, a claim checked against the paper, and
an experiment's summary. Plain dataclasses, JSON-safe through `to_dict`."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["ok", "censored", "diverged", "error"]


@dataclass
class RunResult:
    """What one run produced. `samples` is the first evaluated sample count whose held-out
    metric was below the threshold (status 'ok'), or the budget (censored: a lower bound).
    With `train.keep_best`, `best_samples` says where the best held-out point was, and with
    `train.test_size`, `test_metric` is that checkpoint's metric on the run's own test set."""

    run_id: str
    config: dict
    status: Status
    samples: int | None
    resolution: int  # samples between two scheduled evaluations
    final_metric: float | None
    best_metric: float | None
    curve: list[tuple[int, float]] = field(default_factory=list)  # (samples, held-out metric)
    train_curve: list[tuple[int, float]] = field(default_factory=list)  # (samples, progressive metric)
    eval_schedule: dict = field(default_factory=dict)
    wall_s: float = 0.0
    params: int = 0
    state_size: int | None = None
    error: str | None = None
    test_metric: float | None = None
    best_samples: int | None = None
    extra: dict = field(default_factory=dict)  # e.g. {"probes": [...]} with train.probe

    @property
    def censored(self) -> bool:
        return self.status == "censored"

    @property
    def diverged(self) -> bool:
        return self.status == "diverged"

    @property
    def label(self) -> str:
        return self.config.get("label") or self.config["arch"]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Claim:
    """One of a paper's statements, checked on measured numbers. `held` is None when the data
    cannot decide (e.g. censored runs where the verdict depends on them)."""

    kind: str  # what sort of statement: "separation", "ordering", "threshold", "growth", "floor", ...
    text: str
    held: bool | None
    values: dict[str, Any] = field(default_factory=dict)  # the numbers behind the verdict

    @property
    def verdict(self) -> str:
        return {True: "held", False: "did not hold", None: "no verdict"}[self.held]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "text": self.text, "held": self.held, "verdict": self.verdict,
                "values": json_safe(self.values)}

    @classmethod
    def from_dict(cls, d: dict) -> "Claim":
        return cls(d.get("kind", "claim"), d["text"], d.get("held"), d.get("values", {}))


@dataclass
class Summary:
    """An experiment's analysis of its runs: its own numbers (`data`) and the claims checked.
    `results` (the runs) travel with it for the figures but are not written to summary.json."""

    experiment: str
    scale: str
    data: dict[str, Any]
    claims: list[Claim]
    results: list = field(default_factory=list, repr=False)
    wall_s: float | None = None
    out: Any = None  # where reproduce wrote it (a Path)

    def to_dict(self) -> dict:
        out = {"preset": self.experiment, "scale": self.scale, "quick": self.scale == "quick", **json_safe(self.data),
               "claims": [c.to_dict() for c in self.claims]}
        if self.wall_s is not None:
            out["wall_s"] = self.wall_s
        return out


def json_safe(x: Any) -> Any:
    """JSON-safe: non-finite floats become None, tuples lists, numpy scalars Python numbers."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "item") and callable(x.item) and getattr(x, "ndim", 1) == 0:
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
