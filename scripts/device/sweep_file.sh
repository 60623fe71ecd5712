#!/usr/bin/env bash
# Plain runs of a sweep file on one lent GPU, for at most SECONDS (default 480), side by side in
# WORKERS processes (default the file's run count, at most 3; seeds of a stackable model train as
# one stacked batch in one process anyway). Processes time-slice the card: two trained paper B's
# RNNs at 1.5x one's throughput on an H200, and 25 finished none in 500 s (docs/sweeps.md,
# Executors); small launch-bound models are expected to gain more, not measured yet. Made for the
# runs a search on this project's CPUs still needs after its last rung (a winner's other seeds at
# the paper's 250k steps, the arm not searched), written as plain runs with the search's own run
# ids, e.g.
#   FILE=docs/results/lookup-search-calibration/winners-lstm-n100.toml bash scripts/device/sweep_file.sh 480
# Its price first, on the CPU machine: `archsep sweep FILE --dry-run` (a GPU's time is modelled).
# Everything it keeps goes under $OUT: the finished runs as jsonl (exported every minute, so a cut
# keeps every run that finished), the log, the store's status (each run in flight at its step), the
# machine. Bring them home with `archsep import $OUT/runs.jsonl --out STORE` into the search's store:
# its winners stage then finds them finished. A run cut short leaves its checkpoint (every minute of
# its training) in $OUT/checkpoints/: a second call with CKPT=that folder and FROM=the runs.jsonl
# brought back (both copied into the working tree) goes on from there, e.g.
#   FILE=... FROM=runs.jsonl CKPT=ckpt bash scripts/device/sweep_file.sh 480
set -u
T=${1:-480}
PY=${PY:-python3}
DEV=${DEVICE:-cuda}
FILE=${FILE:?FILE=the sweep file}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 ARCHSEP_CHECKPOINT_S=${ARCHSEP_CHECKPOINT_S:-60}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
source "$(dirname "$0")/common.sh"
machine
if [ -z "${WORKERS:-}" ]; then  # the file's run count (its dry run's first line), at most 3
  N=$($PY -m archsep sweep "$FILE" --out "$W/s" --dry-run 2>/dev/null | head -1 | sed -n 's/.*: \([0-9]*\) run(s).*/\1/p')
  WORKERS=$(( ${N:-1} < 3 ? ${N:-1} : 3 ))
fi
WK=$WORKERS
if [ -n "${FROM:-}" ]; then
  $PY -m archsep import "$FROM" --out "$W/s" > "$OUT/import.log" 2>&1 || { cat "$OUT/import.log"; exit 1; }
fi
if [ -n "${CKPT:-}" ]; then mkdir -p "$W/s/checkpoints" && cp "$CKPT"/*.pt "$W/s/checkpoints/"; fi
timeout "$T" $PY -m archsep sweep "$FILE" --device "$DEV" --workers "$WK" --no-progress --out "$W/s" \
  > "$OUT/sweep.log" 2>&1 &
watch_runs $! "$W/s" runs.jsonl; rc=$?
$PY -m archsep status "$W/s" > "$OUT/status.txt" 2>&1
if ls "$W/s/checkpoints/"*.pt >/dev/null 2>&1; then mkdir -p "$OUT/checkpoints" && cp "$W/s/checkpoints/"*.pt "$OUT/checkpoints/"; fi
echo "workers $WK; exit $rc" >> "$OUT/sweep.log"
tail -5 "$OUT/sweep.log"; cat "$OUT/status.txt"
exit $rc
