#!/bin/sh
# Collect every run's summary.csv under $RUNROOT into bundle/results.csv: one header, the run's name first.
set -eu
: "${RUNROOT:?set RUNROOT to the folder holding the run folders}"
export LC_ALL=C
mkdir -p bundle
out=bundle/results.csv
first=1
for f in "$RUNROOT"/*/summary.csv; do
  run=$(basename "$(dirname "$f")")
  if [ "$first" = 1 ]; then printf 'run,%s\n' "$(head -n 1 "$f")" > "$out"; first=0; fi
  tail -n +2 "$f" | while IFS= read -r line; do printf '%s,%s\n' "$run" "$line"; done >> "$out"
done
