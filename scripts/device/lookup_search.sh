#!/usr/bin/env bash
# lookup-fig2's search scale (issue 52, "the paper's search") at the lengths AT (default 200) on one
# lent GPU, for at most SECONDS (default 480): `archsep reproduce lookup-fig2 --scale search --at AT`.
# Its price first: `archsep reproduce lookup-fig2 --scale search --at 200 --dry-run` (a GPU's time is
# modelled there). A search is resumable: every finished trial is a stored run, so a cut loses only
# the runs in flight; the next call (on this or another machine) starts from the runs brought home
# (FROM=the jsonl, copied into the working tree; several, space-separated, are imported in order).
# A promoted trial that finished on another machine trains again from step 0 there (its kept end
# does not travel), to the same numbers.
# SCALE=search-paper runs the paper's bounds for LSTM and DSS instead (AT=20 first: their controls);
# SCALE=search-steps the reduced search's space for them with the paper's 250k steps (FROM= the
# reduced search's runs, so that its first three rungs are reused). PRESET=dyck-fig2 or
# PRESET=equality-fig4 runs that preset's search scale instead (issue 54), e.g.
#   PRESET=dyck-fig2 AT=200 bash scripts/device/lookup_search.sh 480
# Usage, on the device machine, from the repository root:
#   AT=200 bash scripts/device/lookup_search.sh 480
#   SCALE=search-paper AT=20 bash scripts/device/lookup_search.sh 480
#   AT=200 FROM=ls200.jsonl bash scripts/device/lookup_search.sh 480    (a second call)
# Everything it keeps goes under $OUT: the finished runs as jsonl (exported every minute), the log,
# the summary when the search finished, the machine. Bring the runs home with
# `archsep import $OUT/search.jsonl --out STORE`, then `archsep reproduce lookup-fig2 --scale search
# --at AT --out STORE` finishes or summarises it there.
set -u
T=${1:-480}
PY=${PY:-python3}
DEV=${DEVICE:-cuda}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
source "$(dirname "$0")/common.sh"
machine
for f in ${FROM:-}; do  # one or more files, in order (space-separated)
  $PY -m archsep import "$f" --out "$W/s" >> "$OUT/import.log" 2>&1 || { cat "$OUT/import.log"; exit 1; }
done
timeout "$T" $PY -m archsep reproduce "${PRESET:-lookup-fig2}" --scale "${SCALE:-search}" --at "${AT:-200}" --device "$DEV" \
  --workers "${WORKERS:-2}" --no-progress --out "$W/s" > "$OUT/search.log" 2>&1 &
watch_runs $! "$W/s" search.jsonl; rc=$?
for f in summary.json summary.txt search.json; do [ -e "$W/s/$f" ] && cp "$W/s/$f" "$OUT/"; done
$PY -m archsep status "$W/s" >> "$OUT/search.log" 2>&1
tail -5 "$OUT/search.log"
exit $rc
