# Shared by the device scripts (sourced, not run): what the machine is, and a job's finished runs
# exported as JSON lines every minute while it trains, so that a cut keeps every run that finished.
# Needs PY and OUT set.

# the machine, into $OUT/machine.txt
machine() {
  { date -u +%FT%TZ; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())"
    nproc; } > "$OUT/machine.txt" 2>&1
}

# save_runs STORE NAME: the store's finished runs to $OUT/NAME (replaced whole)
save_runs() {
  [ -e "$1/archsep.db" ] && $PY -m archsep export "$1" --format jsonl -o "$OUT/$2.tmp" >/dev/null 2>&1 \
    && mv "$OUT/$2.tmp" "$OUT/$2"
}

# watch_runs PID STORE NAME: save_runs every minute while PID runs and once at its end; returns
# PID's exit status
watch_runs() {
  local n=0 rc
  while kill -0 "$1" 2>/dev/null; do
    sleep 5; n=$((n + 1)); [ $((n % 12)) = 0 ] && save_runs "$2" "$3"
  done
  wait "$1"; rc=$?
  save_runs "$2" "$3"
  return $rc
}
