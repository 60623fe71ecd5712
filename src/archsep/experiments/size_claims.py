"""The claims of a size preset under the fair protocol, read off its cells over seeds: an arm's
positive control, beating the task's best trivial baseline, reaching a level, falling below
another arm, and doing what the task asks where a blind heuristic cannot (an extra test set).
`SizeClaims` is what `SizeExperiment` claims with; `self.points` ((label, N) -> mean and t
interval of the test accuracy), `self.extra` ((label, N, extra set) -> the same on that set) and
`self.best_trivial` ((variant, N) -> accuracy) are set from the summary's data first."""
from __future__ import annotations

from typing import Protocol

from ..results import Claim


class _Lengths(Protocol):
    """What the claims read of a scale (`size.SizeScale`): its lengths."""

    @property
    def Ns(self) -> tuple[int, ...]: ...

CONTROL = 0.95  # a positive control: mean test accuracy at least this where theory says the arm can learn


def untrained(label: str, control: Claim) -> str:
    """Why a claim on `label` gets no verdict: its own control failed (it did not train here), or
    a composite control failed on another arm's part (e.g. Dyck's "a Transformer trains at the
    longest length"), which says nothing of `label` itself."""
    if control.held is None:
        return f"a control it needs has no verdict ({control.text})"
    if control.values.get("label") == label:
        return f"{label} did not train here ({control.text})"
    return f"a control it needs did not hold ({control.text})"


def jointly(*held: bool | None) -> bool | None:
    """Several controls as one: False where any failed, else None where any has no verdict (not
    run yet), else True."""
    if any(h is False for h in held):
        return False
    return None if any(h is None for h in held) else True


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


class SizeClaims:
    """The fair protocol's claims (a mixin of `SizeExperiment`)."""

    def interval(self, label: str, N: int) -> tuple[float | None, float | None, float | None]:
        """(mean, 95% t lower, upper) of `label`'s test accuracy at N over seeds (None where unknown)."""
        p = getattr(self, "points", {}).get((label, N))
        if p is None or p["mean"] is None:
            return None, None, None
        return p["mean"], p["ci"][0], p["ci"][1]

    def control(self, label: str, N: int, level: float = CONTROL) -> Claim:
        """The positive control of `label`: at length N (where theory says it can), its mean test
        accuracy over its seeds reaches `level`. An arm without a passing control gets no verdict
        elsewhere. No verdict where the cell has no result (not run yet, or every run failed): a
        control not run has not failed. With some of its seeds missing it is decided only where
        they cannot change it: the mean of all is at most (sum + missing) / seeds, each missing
        one at 100%; below `level` the control fails whatever they score (a search's settled
        winner: `sweeps.search`); otherwise no verdict until they are there."""
        m, _, _ = self.interval(label, N)
        text = f"control: {label} learns at N={N} (mean {pct(m)} >= {pct(level)})"
        values: dict = {"label": label, "N": N, "mean": m, "level": level}
        if m is None:
            return Claim("control", f"no verdict (no result yet): {text}", None, values)
        p = getattr(self, "points", {}).get((label, N)) or {}
        have, planned = int(p.get("seeds") or 0), int(p.get("cells") or 0)
        if 0 < have < planned:
            most = (m * have + planned - have) / planned
            values.update(seeds=have, planned=planned, most=most)
            part = (f"{have} of {planned} seeds; with the other {planned - have} at 100% the mean is at most "
                    f"{pct(most)}")
            if most >= level:
                return Claim("control", f"no verdict ({part}): {text}", None, values)
            return Claim("control", f"{text}; {part}, so it fails whatever they score", False, values)
        return Claim("control", text, m >= level, values)

    def beats_baseline(self, label: str, N: int, control: Claim, variant: str = "") -> Claim:
        """`label` recognises the task at N: the lower end of its 95% interval lies above the task's
        best trivial baseline at N. No verdict where its control failed or a seed is missing."""
        m, lo, _ = self.interval(label, N)
        base = getattr(self, "best_trivial", {}).get((variant, N))
        text = (f"N={N}: {label} above the best trivial baseline ({pct(base)}): mean {pct(m)}, 95% interval "
                f"lower end {pct(lo)}")
        values = {"label": label, "N": N, "mean": m, "lower": lo, "baseline": base, "control": control.held}
        if not control.held:
            return Claim("baseline", f"no verdict: {untrained(label, control)}; {text}", None, values)
        if lo is None or base is None:
            return Claim("baseline", f"no verdict (fewer than 2 seeds or no baseline): {text}", None, values)
        return Claim("baseline", text, lo > base, values)

    def reaches(self, label: str, N: int, control: Claim, level: float = CONTROL) -> Claim:
        """`label` does well at N: its mean test accuracy reaches `level` there (the control's rule
        at another length). No verdict where its control failed (it did not train here at all)."""
        m, lo, _ = self.interval(label, N)
        text = f"N={N}: {label} reaches {pct(level)}: mean {pct(m)} (95% interval lower end {pct(lo)})"
        values = {"label": label, "N": N, "mean": m, "lower": lo, "level": level, "control": control.held}
        if not control.held:
            return Claim("threshold", f"no verdict: {untrained(label, control)}; {text}", None, values)
        return Claim("threshold", text, m is not None and m >= level, values)

    def below(self, worse: str, better: str, N: int, control: Claim) -> Claim:
        """`worse` falls short of `better` at N: their 95% intervals do not overlap (worse's upper
        end below better's lower end). No verdict where worse's control failed (it did not train
        here, so falling short says nothing about N)."""
        mw, _, hw = self.interval(worse, N)
        mb, lb, _ = self.interval(better, N)
        text = (f"N={N}: {worse} below {better}: {pct(mw)} (upper end {pct(hw)}) vs {pct(mb)} "
                f"(lower end {pct(lb)})")
        values = {"N": N, worse: mw, better: mb, "upper": hw, "lower": lb, "control": control.held}
        if not control.held:
            return Claim("ordering", f"no verdict: {untrained(worse, control)}; {text}", None, values)
        if hw is None or lb is None:
            return Claim("ordering", f"no verdict (fewer than 2 seeds): {text}", None, values)
        return Claim("ordering", text, hw < lb, values)

    def versus(self, s: _Lengths, tf: str, recurrent: tuple[str, ...], variant: str = "",
               every_length: bool = False) -> list[Claim]:
        """A Transformer against recurrent arms under the fair protocol: each arm's positive control
        at the shortest length; at the longest (at every longer one with `every_length`, shortest
        first: a search's lengths, so that where an arm falls behind can be seen), `tf` above the
        best trivial baseline (of the task variant `variant`) and each recurrent arm below `tf`
        (intervals over seeds; no verdict for an arm whose control failed: falling short at a
        longer length would say nothing about the length). In that order: the controls (`tf`
        first), then per length the baseline claim and one `below` per recurrent arm."""
        Ns = sorted(set(s.Ns))
        lo, longer = Ns[0], (Ns[1:] if every_length else Ns[-1:])
        controls = {lab: self.control(lab, lo) for lab in (tf, *recurrent)}
        return [*controls.values(),
                *(c for N in longer for c in (self.beats_baseline(tf, N, controls[tf], variant),
                                              *(self.below(lab, tf, N, controls[lab]) for lab in recurrent)))]

    def reads(self, label: str, N: int, control: Claim, test: str, what: str, blind: str,
              level: float = CONTROL) -> Claim:
        """`label` does what the task asks rather than what a blind heuristic does: its mean
        accuracy reaches `level` on the ordinary test set (positives and negatives) and on the
        task's extra test set `test`, negatives the heuristic `blind` accepts every one of (it
        scores 0% there), each mean with its 95% interval's lower end. Both are needed: a model
        that rejects everything scores 100% on such a set. No verdict where `label`'s control
        failed or the cells hold no such set."""
        m, lo_m, _ = self.interval(label, N)
        p = getattr(self, "extra", {}).get((label, N, test))
        sm, slo = (p["mean"], p["ci"][0]) if p else (None, None)
        text = (f"N={N}: {label} {what} (>= {pct(level)} on the test set and on the {test} negatives, where "
                f"{blind} scores 0%): {pct(m)} (lower end {pct(lo_m)}) and {pct(sm)} (lower end {pct(slo)})")
        values = {"label": label, "N": N, "mean": m, test: sm, f"{test} lower": slo, "level": level,
                  "control": control.held}
        if not control.held:
            return Claim("reads", f"no verdict: {untrained(label, control)}; {text}", None, values)
        if m is None or sm is None:
            return Claim("reads", f"no verdict (no {test} test set): {text}", None, values)
        return Claim("reads", text, m >= level and sm >= level, values)
