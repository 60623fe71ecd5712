"""`archsep report`'s table of runs has a `width` column right after the arch: the run's model
width (its `width`, or `hidden` for an arch whose width is called so), empty where none is set."""
from __future__ import annotations

import re

from archsep.config import RunConfig, TrainConfig
from archsep.experiments.report import build
from archsep.reporting.report import run_width
from archsep.results import RunResult
from archsep.store import open_store, record


def _runs_table(html: str) -> tuple[list[str], list[list[str]]]:
    table = html[html.index("<h3>Runs</h3>"):]
    table = table[:table.index("</table>")]
    head = re.findall(r"<th>(.*?)</th>", table)
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S) for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]]
    return head, rows


def test_the_runs_table_shows_each_runs_width(tmp_path):
    train = TrainConfig(budget=640, batch_size=32, eval_every=5, eval_size=100, threshold=0.1)
    task = {"N": 4, "train_lengths": "fixed", "vocab": 8}
    configs = [RunConfig("index-lookup", "tf-preln", task, {"layers": 1, "width": w, "heads": 2}, train, seed,
                         f"TF-{w}") for w in (32, 64) for seed in (0, 1)]
    configs.append(RunConfig("index-lookup", "lstm", task, {"layers": 1, "hidden": 24}, train, 0, "LSTM"))
    configs.append(RunConfig("index-lookup", "lstm", task, {"layers": 1}, train, 0, "LSTM-default"))
    with open_store(tmp_path) as store:
        for i, c in enumerate(configs):
            store.add(record(RunResult(c.run_id, c.to_dict(), "ok", 320 + 32 * i, 32, 0.05, 0.05, wall_s=1.0)))
        html, _ = build(store)
    head, rows = _runs_table(html)
    assert head[:4] == ["run", "arch", "width", "task_params"]
    widths = {(r[1], r[2]) for r in rows}
    assert widths == {("TF-32", "32"), ("TF-64", "64"), ("LSTM", "24"), ("LSTM-default", "")}
    assert len(rows) == len(configs)


def test_a_width_is_read_from_the_archs_own_field():
    assert run_width({"arch": "tf-preln", "model_params": {"width": 48}}) == 48
    assert run_width({"arch": "lstm", "model_params": {"hidden": 40}}) == 40
    assert run_width({"arch": "ffn", "model_params": {"hidden": [16, 16]}}) == ""  # widths, not a width
    assert run_width({"arch": "not-registered", "model_params": {"width": 8}}) == 8
    assert run_width({"arch": "not-registered", "model_params": {}}) == ""
    assert run_width({"arch": "tf-preln", "model_params": "damaged"}) == ""
