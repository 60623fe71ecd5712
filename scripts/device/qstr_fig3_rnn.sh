#!/usr/bin/env bash
# qstr-fig3 at full scale: the RNN arm at q = 2..5 on one lent GPU (on this project's 2 CPU cores it
# is 60 core-hours), and the RNN at q = 1 once more, on the GPU, beside the same five runs trained
# on the CPU: a control that the device does not move the statistic. Also the CUDA tests.
# Usage, on the device machine, from the repository root: bash scripts/device/qstr_fig3_rnn.sh SECONDS
# Everything it keeps goes under $OUT: the finished runs as jsonl (exported every minute, so a cut
# leaves them), the logs, the machine. Bring the runs home with `archsep import FILE --out STORE`.
set -u
T=${1:-480}
DEV=${DEVICE:-cuda}
PY=${PY:-python3}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 ARCHSEP_CHECKPOINT_S=off
W=$(mktemp -d)
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())"
  nproc; git rev-parse HEAD 2>/dev/null; } > "$OUT/machine.txt" 2>&1
export_all() {
  for s in q3 q3q1; do
    [ -e "$W/$s/archsep.db" ] && $PY -m archsep export "$W/$s" --format jsonl -o "$OUT/$s.jsonl.tmp" >/dev/null 2>&1 \
      && mv "$OUT/$s.jsonl.tmp" "$OUT/$s.jsonl"
  done
}
timeout "$T" $PY -m archsep reproduce qstr-fig3 --only RNN --at 2,3,4,5 --device "$DEV" --workers 20 --no-progress \
  --out "$W/q3" > "$OUT/q3.log" 2>&1 &
P1=$!
timeout "$T" $PY -m archsep reproduce qstr-fig3 --only RNN --at 1 --device "$DEV" --workers 5 --no-progress \
  --out "$W/q3q1" > "$OUT/q3q1.log" 2>&1 &
P2=$!
[ "$DEV" = cuda ] && timeout 240 $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py -k "not command_line" \
  > "$OUT/cuda_tests.log" 2>&1 &
n=0
while kill -0 $P1 2>/dev/null || kill -0 $P2 2>/dev/null; do
  sleep 5; n=$((n + 1)); [ $((n % 12)) = 0 ] && export_all
done
wait
export_all
{ echo "end $(date -u +%FT%TZ)"; $PY -m archsep status "$W/q3"; $PY -m archsep status "$W/q3q1"; } >> "$OUT/machine.txt" 2>&1
rm -rf "$W"
