#!/usr/bin/env bash
# Strict isolation and the measurement study on the H200, in one call (~6 min):
#   ramp probe: is a fresh process's first fraction of a second slower? (why the timing kit settles)
#   vector_add under --isolation strict (all layers active, CUDA working)
#   the measurement study (4 fresh processes x 4 blocks per example; settle warm-up, learned noise,
#   confirmation runs; the raw runs come back for re-analysis)
#   softmax under --isolation strict with profiling, a replayed candidate promoted: Proton + NCU
#   summary per correct candidate, deep profiles for the baseline and the finalist
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 100 \
  > "$OUT/clocks.csv" 2>/dev/null &) ; sleep 0.5
timeout 40 python3 scripts/gpu/ramp_probe.py --json "$OUT/ramp.json" 2>&1 | tee -a "$OUT/summary.txt" || true
pkill -f "nvidia-smi --query-gpu=timestamp" || true
RUN_LIMIT=120 run_opt va_strict vector_add --provider replay --replay-dir examples/vector_add/candidates \
  --max-rounds 1 --candidates-per-round 1 --isolation strict --no-profile
timeout 200 python3 scripts/measurement_study.py --out "$OUT/study" --processes 4 --blocks 4 --budget-seconds 0.15 \
  2>&1 | tail -5 | tee -a "$OUT/summary.txt" || true
RUN_LIMIT=230 run_opt softmax_strict softmax --provider replay --replay-dir examples/softmax/candidates \
  --max-rounds 1 --candidates-per-round 1 --isolation strict --max-total-seconds 220
cd "$OUT" && tar czf runs.tgz study/runs_*.json study/study.json va_strict.log softmax_strict.log ramp.json \
  va_strict/run.json softmax_strict/run.json softmax_strict/experiments.json softmax_strict/*_profile.json \
  softmax_strict/experiments/*/result.json 2>/dev/null || true
rm -rf "$OUT/study" "$OUT/va_strict" "$OUT/softmax_strict" "$OUT/ramp.json"
ls -la "$OUT"
