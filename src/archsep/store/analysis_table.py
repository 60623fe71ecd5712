"""The `[analysis]` table: what a sweep file may say about how its runs are analysed, and what a
store keeps of it with each sweep. One schema, checked in one place: when a sweep file is read
(`archsep.sweeps.file`) and when a stored sweep is read back (`archsep.store.rows.check_sweep`),
each caller raising its own kind of error (a sweep file's mistake, a damaged store)."""
from __future__ import annotations

from typing import Any, Callable, NoReturn

from ..errors import closest, shown

RUN_KEYS = ("task", "arch", "label", "seed", "task_params", "model_params", "train")
# [analysis]: the x axis of the exponent fits and the pairs of separations to test
ANALYSIS_KEYS = ("x", "separations", "scale", "measure", "width")
MEASURES = ("samples", "size")  # samples to a threshold against x; accuracy per (arch, width, x) cell
STORED_KEYS = (*ANALYSIS_KEYS, "overrides")  # a preset's --set values are kept with its sweep


def _short(value: Any) -> str:
    """A value from outside, for an error message: its repr, cut (store/rows.py shows values so too)."""
    return shown(repr(value), 60)


def check_analysis(a: dict, fail: Callable[[str, str], NoReturn], stored: bool = False) -> dict:
    """`a`, checked: `fail(field, why)` is called on the first problem. A sweep file (`stored`
    False) must also be consistent (two different labels to a separation; a width and no
    separations with the size measure); a stored table may hold a preset's `overrides`."""
    keys = STORED_KEYS if stored else ANALYSIS_KEYS
    for k in a:
        if k not in keys:
            fail(f"analysis.{shown(str(k), 40)}", f"unknown key{closest(str(k), keys)}; allowed: {', '.join(keys)}")
    x = a.get("x", "task_params.N")
    if not isinstance(x, str) or x.split(".")[0] not in RUN_KEYS:
        fail("analysis.x", f"expected a config field such as \"task_params.N\", got {_short(x)}")
    seps = a.get("separations", [])
    if not isinstance(seps, list) or not all(isinstance(s, list) and len(s) == 2 and all(isinstance(t, str) for t in s)
                                             for s in seps):
        fail("analysis.separations", f"expected pairs of labels like [[\"TF\", \"FFN\"]], got {_short(seps)}")
    if not isinstance(a.get("scale", ""), str):
        fail("analysis.scale", f"expected a scale name, got {_short(a['scale'])}")
    measure = a.get("measure", "samples")
    if measure not in MEASURES:
        fail("analysis.measure", f"unknown value {_short(measure)}{closest(str(measure), MEASURES)}; "
                                 f"allowed: {', '.join(MEASURES)}")
    width = a.get("width")
    if width is not None and not (isinstance(width, str) and width.startswith("model_params.")
                                  and width != "model_params."):
        fail("analysis.width", f"expected a model parameter such as \"model_params.hidden\", got {_short(width)}")
    if stored:
        ov = a.get("overrides", {})
        if not isinstance(ov, dict) or not all(isinstance(v, (str, int, float, bool, list)) for v in ov.values()):
            fail("analysis.overrides", f"expected a table of --set values, got {_short(ov)}")
        return a
    for i, (better, worse) in enumerate(seps):
        if better == worse:
            fail(f"analysis.separations[{i}]", f"a separation compares two different labels, got {better!r} twice")
    if width is not None and measure != "size":
        fail("analysis.width", "with measure = \"size\", the model parameter that is the width, "
                               f"such as \"model_params.hidden\"; got {_short(width)}")
    if measure == "size" and seps:
        fail("analysis.separations", "compare exponents of samples-to-threshold; a size measurement has none "
                                     "(leave them out)")
    out = {"x": x, "separations": seps}
    return out if measure == "samples" else {**out, "measure": measure, **({"width": width} if width else {})}
