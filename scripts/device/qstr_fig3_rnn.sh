#!/usr/bin/env bash
# qstr-fig3's RNN arm on one lent GPU: the runs at the q values AT (default 3) of the scale SCALE
# (default retrieval, issue 54: the GRU of hidden 500q, MSE 0.5; SCALE=full is the simple RNN at
# 0.88, measured below), WORKERS processes at a time (default 2), for at most SECONDS; then the
# CUDA tests. ONLY=RNN,TF,FFN trains the other arms too (default RNN: the CPU does the others).
# The retrieval scale at q = 3..5 is 45 runs, its RNN 77 min of one H100 at worst (modelled:
# `archsep reproduce qstr-fig3 --scale retrieval --at 3,4,5 --dry-run`); at q = 2 on 2 CPU cores
# the GRU's first run stopped at MSE 0.5 after a quarter of its budget, so a lease does about one q.
# With CONTROL=1, also the RNN at q = 1 once more on the GPU (into a store of its own), beside the
# same five runs trained on the CPU: a check that the device does not move the statistic.
# On the CPU the RNN at q = 2..5 is 60 core-hours. Measured on an H200 (2026-11-26):
#   one process: 3.2 ms a step at q = 2 and 4.1 ms at q = 5, evaluations included, so a run to the
#     2M budget (31,250 steps) is 100-130 s;
#   two processes (AT=2,3): 10 runs, all to the budget, in about 750 s (6 in 450 s, then 4 in 300 s),
#     about 75 s of wall a run: 1.5x one process's throughput;
#   25 processes sharing an H100 finished no run in 500 s.
# So a lease of 15 minutes does two q values (ten runs) with two processes, in two calls if need be:
# the second starts from the first's runs (FROM=the jsonl it brought home, copied into the working
# tree), so that nothing reruns. TESTS=0 skips the CUDA tests (last run: all passed on an H200).
# Usage, on the device machine, from the repository root:
#   AT=3 bash scripts/device/qstr_fig3_rnn.sh 450
#   AT=3,4 FROM=q3.jsonl TESTS=0 bash scripts/device/qstr_fig3_rnn.sh 300   (a second call)
#   SCALE=full AT=4,5 bash scripts/device/qstr_fig3_rnn.sh 450              (the full scale's)
# Everything it keeps goes under $OUT: the finished runs as jsonl (exported every minute, so a cut
# leaves them), the logs, the machine. Bring the runs home with `archsep import FILE --out STORE`.
set -u
T=${1:-480}
DEV=${DEVICE:-cuda}
PY=${PY:-python3}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 ARCHSEP_CHECKPOINT_S=off
W=$(mktemp -d)
source "$(dirname "$0")/common.sh"
machine
export_all() {
  for s in q3 q3q1; do save_runs "$W/$s" "$s.jsonl"; done
}
if [ -n "${FROM:-}" ]; then
  $PY -m archsep import "$FROM" --out "$W/q3" > "$OUT/import.log" 2>&1 || { cat "$OUT/import.log"; exit 1; }
fi
timeout "$T" $PY -m archsep reproduce qstr-fig3 --scale "${SCALE:-retrieval}" --only "${ONLY:-RNN}" --at "${AT:-3}" --device "$DEV" --workers "${WORKERS:-2}" \
  --no-progress --out "$W/q3" > "$OUT/q3.log" 2>&1 &
P1=$!
P2=$P1
if [ "${CONTROL:-0}" = 1 ]; then
  timeout "$T" $PY -m archsep reproduce qstr-fig3 --scale "${SCALE:-retrieval}" --only RNN --at 1 --device "$DEV" --workers 1 --no-progress \
    --out "$W/q3q1" > "$OUT/q3q1.log" 2>&1 &
  P2=$!
fi
n=0
while kill -0 $P1 2>/dev/null || kill -0 $P2 2>/dev/null; do
  sleep 5; n=$((n + 1)); [ $((n % 12)) = 0 ] && export_all
done
export_all
[ "$DEV" = cuda ] && [ "${TESTS:-1}" = 1 ] && timeout 120 $PY -m pytest -q -p no:cacheprovider tests/system/test_cuda.py -k "not command_line" \
  > "$OUT/cuda_tests.log" 2>&1
{ echo "end $(date -u +%FT%TZ)"; for s in q3 q3q1; do [ -e "$W/$s" ] && $PY -m archsep status "$W/$s"; done; } \
  >> "$OUT/machine.txt" 2>&1
rm -rf "$W"
