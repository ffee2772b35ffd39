#!/bin/bash
# The H200 re-runs of issue 21, in one device call: the gpu_bound_decode record (3 repetitions), then alone on the
# GPU 13 runs of gpu_greedy_smoke, then 3 of each recipe beside a busy process, then 10 of gpu_bound_decode alone.
# Each run is a fresh process of the recipe's runner, as `vault repro` starts it. Folders under $OUT/runs, tarred.
set -u
R=$OUT/runs
mkdir -p "$R/smoke" "$R/bound"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$R/nvidia-smi.csv" 2>&1
one() {  # profile folder; skipped past 510 s, so the tar below always runs inside the call's limit
  local t0=$SECONDS
  if [ $SECONDS -gt 510 ]; then echo "$2 skipped (time)" | tee -a "$R/runs.txt"; return; fi
  CUDA_VISIBLE_DEVICES=0 python3 -m cloudvault.repro.gpu_smoke --device cuda --profile "$1" --out "$R/$2" \
    > "$R/$2.log" 2>&1
  echo "$2 exit $? $((SECONDS - t0)) s" | tee -a "$R/runs.txt"
}
for i in 1 2 3; do one bound bound/record_rep$i; done
for i in $(seq -w 1 13); do one smoke smoke/alone_$i; done
python3 bench/repro_h200/busy.py 900 > "$R/busy.log" 2>&1 &
BUSY=$!
sleep 10
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv >> "$R/busy.log" 2>&1
for i in 1 2 3; do one smoke smoke/busy_$i; one bound bound/busy_$i; done
kill $BUSY
wait $BUSY 2>/dev/null
sleep 3
for i in $(seq -w 1 10); do one bound bound/alone_$i; done
tar czf "$OUT/repro_h200.tar.gz" -C "$OUT" runs && rm -rf "$R"
ls -la "$OUT"
