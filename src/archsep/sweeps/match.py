"""A sweep's `[match]` table: each matched arm's width chosen so that its parameters (or state)
match a reference arm's within a tolerance, at every grid point (`models.matching` counts)."""
from __future__ import annotations

import json
from typing import Any

from ..config import RunConfig
from ..errors import ArchsepError, closest
from .flat import _check_table, _describe, _nest

MATCH_KEYS = ("to", "by", "arms", "fields", "tolerance")


class Matcher:
    """A sweep's `[match]` table (MAD's iso-parameter / iso-state protocol, models/matching.py):

        [match]
        to = "TF"                  # the arm every other arm is matched to, at each grid point
        by = "params"              # or "state": floats carried between positions
        arms = ["LSTM", "RetNet"]  # optional: the arms to match (default: every arm but `to`)
        fields = { LSTM = "hidden" }   # optional: the parameter searched (default width, else hidden)
        tolerance = 0.05           # optional: the largest relative difference accepted

    `to` may also be a count (e.g. 50000). A matched arm's width is chosen per grid point (the
    counts depend on the task's vocabulary and length); the arm must not set it itself."""

    def __init__(self, doc: Any, base: dict, arms: list[dict], labels: list, where: str):
        from ..models.matching import BY

        _check_table(doc, "match", MATCH_KEYS, where)
        self.where, self.base, self.arms, self.labels = where, base, arms, labels
        to = doc.get("to")
        self.ref: int | None = None
        self.target: int | None = None
        if isinstance(to, str) and to in labels:
            self.ref = labels.index(to)
        elif isinstance(to, int) and not isinstance(to, bool) and to >= 1:
            self.target = to
        else:
            raise ArchsepError(f"{where}: match.to: expected an arm's label ({', '.join(map(str, labels))}) "
                               f"or a count >= 1, got {to!r}")
        self.by = doc.get("by", "params")
        if self.by not in BY:
            raise ArchsepError(f"{where}: match.by: unknown value {self.by!r}{closest(str(self.by), BY)}; "
                               f"allowed: {', '.join(BY)}")
        chosen = doc.get("arms", [lab for i, lab in enumerate(labels) if i != self.ref])
        if not isinstance(chosen, list) or not all(isinstance(c, str) for c in chosen):
            raise ArchsepError(f"{where}: match.arms: expected a list of arm labels, got {chosen!r}")
        for c in chosen:
            if c not in labels or labels.index(c) == self.ref:
                raise ArchsepError(f"{where}: match.arms: '{c}' is not an arm to match{closest(c, map(str, labels))}; "
                                   f"arms: {', '.join(str(lab) for i, lab in enumerate(labels) if i != self.ref)}")
        self.matched_arms = {i for i, lab in enumerate(labels) if lab in chosen}
        fields = doc.get("fields", {})
        if not isinstance(fields, dict) or not all(isinstance(v, str) for v in fields.values()):
            raise ArchsepError(f"{where}: match.fields: expected a table of label = parameter, got {fields!r}")
        for lab in fields:
            if lab not in chosen:
                raise ArchsepError(f"{where}: match.fields.{lab}: not a matched arm; matched: {', '.join(chosen)}")
        self.fields = fields
        tol = doc.get("tolerance", 0.05)
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1:
            raise ArchsepError(f"{where}: match.tolerance: expected a fraction in (0, 1), got {tol!r}")
        self.tolerance = float(tol)
        for i in self.matched_arms:  # the arm's own table must not set what the match chooses
            f = self._field(i)
            if f"model_params.{f}" in arms[i]:
                raise ArchsepError(f"{where}: arms[{i}].model_params.{f}: set by [match] (matched to "
                                   f"{to!r} by {self.by}); remove it")
        self.cache: dict[str, Any] = {}
        self.targets: dict[str, int] = {}  # the reference's count per grid point
        self.found: list[dict] = []

    def _field(self, i: int) -> str:
        from ..models.matching import width_field

        arch = {**self.base, **self.arms[i]}.get("arch")
        if self.labels[i] in self.fields:
            return self.fields[self.labels[i]]
        try:
            return width_field(str(arch))
        except ArchsepError as e:
            raise ArchsepError(f"{self.where}: match.fields.{self.labels[i]}: {e.detail}") from None

    def _count(self, flat: dict) -> tuple[str, dict, Any]:
        """(arch, model params, task spec) of a flat run (its seed does not change the spec)."""
        cfg = RunConfig.from_dict(_nest({**flat, "seed": 0}))
        return cfg.arch, dict(cfg.model_params), cfg.build_task().spec

    def _reference(self, combo: dict) -> int:
        """The reference arm's count at this grid point, counted once for every arm matched to it."""
        from ..models.matching import measure

        key = json.dumps(combo, sort_keys=True, default=str)
        if key not in self.targets:
            assert self.ref is not None
            arch, params, spec = self._count({**self.base, **self.arms[self.ref], **combo})
            self.targets[key] = measure(arch, params, spec, self.by)
        return self.targets[key]

    def matched(self, i: int, point: dict, combo: dict) -> dict:
        if i not in self.matched_arms:
            return point
        from ..models.matching import match_width

        f = self._field(i)
        point = {k: v for k, v in point.items() if k != f"model_params.{f}"}  # base's or the grid's value
        key = json.dumps([i, point], sort_keys=True, default=str)
        if key not in self.cache:
            desc = _describe({**combo, "label": self.labels[i]}, list(combo) + ["label"])
            try:
                target = self.target if self.target is not None else self._reference(combo)
                arch, params, spec = self._count(point)
                m = match_width(arch, params, spec, target, self.by, f, self.tolerance)
            except ArchsepError as e:
                if e.field in ("by", "target"):
                    key = "by" if e.field == "by" else "to"
                    raise ArchsepError(f"{self.where}: match.{key}: run {desc}: {e.detail}") from None
                raise ArchsepError(f"{self.where}: match: run {desc}: {e}") from None
            self.cache[key] = m
            self.found.append({"label": self.labels[i], **{k: v for k, v in combo.items()}, "field": f,
                               "value": m.value, "count": m.count, "target": m.target})
        return {**point, f"model_params.{f}": self.cache[key].value}


# --- validation helpers -------------------------------------------------------------------------
