"""Tests that need an optional package skip, naming the extra that installs it: the README's test
command passes on the base install (`bash scripts/setup.sh`), and CI installs every extra."""
from __future__ import annotations

import pytest

EXTRA_OF = {"ray": "ray", "pyarrow": "parquet", "mlflow": "mlflow", "sqlalchemy": "mlflow", "alembic": "mlflow",
            "tensorboard": "tensorboard"}


def needs(module: str):
    """`pytest.importorskip(module)` with a reason naming its extra."""
    extra = EXTRA_OF[module]
    return pytest.importorskip(module, reason=f"{module} is not installed: the '{extra}' extra "
                                              f"(bash scripts/setup.sh {extra}; CI installs it)")
