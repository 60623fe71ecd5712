"""Tables written as CSV: one row per dict, the union of their keys as columns, atomically."""
from __future__ import annotations

import csv
import json
from pathlib import Path


def write_csv(rows: list[dict], path: Path, field: str = "out") -> Path:
    """Atomically (archsep.fileio): a reader never sees half a file, a failure leaves nothing."""
    from ..fileio import OWNED, atomic_write

    cols = list(dict.fromkeys(k for r in rows for k in r))

    def write(f) -> None:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        w.writerows(rows)

    return atomic_write(path, write, field, allow=OWNED, newline="")


def export_rows(store) -> list[dict]:
    """One flat dict per run: config fields as dotted columns, metrics (with `by_length.<n>`, the
    metric at each length of train.eval_lengths), provenance."""
    from ..analysis.lengths import by_length

    sweeps_of: dict[str, list[str]] = {}
    names = {s["sweep_id"]: s["name"] for s in store.sweeps()}
    for p in store.planned():
        sweeps_of.setdefault(p["run_id"], []).append(names.get(p["sweep_id"], p["sweep_id"]))
    out = []
    for row in store.rows():
        checked = store.check(row)  # a damaged row: one line naming the store, the run and the field
        cfg = checked.config
        flat = {"run_id": row["run_id"], "task": cfg.get("task"), "arch": cfg.get("arch"),
                "label": cfg.get("label"), "seed": cfg.get("seed")}
        for t in ("task_params", "model_params", "train"):
            for k, v in sorted((cfg.get(t) or {}).items()):
                flat[f"{t}.{k}"] = json.dumps(v) if isinstance(v, (list, dict)) else v
        flat.update({k: row[k] for k in ("status", "samples", "resolution", "final_metric", "best_metric",
                                        "wall_s", "params", "state_size")})
        flat.update({k: row.get(k) for k in ("test_metric", "best_samples")})
        flat.update({f"by_length.{n}": v for n, v in sorted(by_length(checked).items())})  # train.eval_lengths
        flat["censored"] = row["status"] == "censored"
        flat["error"] = (row["error"] or "").strip().splitlines()[0] if row["error"] else None
        flat.update({k: row[k] for k in ("archsep_version", "torch_version", "device", "host", "started_at",
                                        "finished_at", "committed_at")})
        flat["sweeps"] = ",".join(sorted(set(sweeps_of.get(row["run_id"], []))))
        flat["curve"] = row["curve"]
        flat["train_curve"] = row["train_curve"]  # the progressive (pre-update) metric at each scheduled point
        out.append(flat)
    return out


def load(out_dir: str | Path):
    """Every run stored in `out_dir` as a pandas DataFrame, one row per run: config fields as
    dotted columns (`task_params.N`, `train.lr`), status, samples, metrics, provenance, and the
    held-out and training curves as JSON (`curve`, `train_curve`). The same table as `archsep export`."""
    import pandas as pd

    from ..registry import reading
    from ..store import open_store

    with reading(), open_store(out_dir, create=False) as store:
        return pd.DataFrame(export_rows(store))


def load_results(out_dir: str | Path) -> list:
    """Every run stored in `out_dir` as `RunResult`s (what `analyze` takes)."""
    from ..registry import reading
    from ..store import open_store

    with reading(), open_store(out_dir, create=False) as store:
        return store.results()
