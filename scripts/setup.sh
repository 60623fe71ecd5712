#!/usr/bin/env bash
# Sets up .venv with archsep and its test tools, never pulling CUDA wheels.
# Usage: bash scripts/setup.sh [extra,extra]   e.g. bash scripts/setup.sh ray,parquet
set -euo pipefail
cd "$(dirname "$0")/.."
extras="test${1:+,$1}"
py=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$py" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt torch==2.13.0
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[${extras}]"
echo "archsep installed in .venv (extras: ${extras})" >&2
