#!/usr/bin/env bash
# The profiled softmax and the tuner on softmax, on the H200 (~5 min):
#   softmax under --isolation strict with profiling, two replayed candidates (Proton + NCU summary
#   per correct candidate, deep profiles for the baseline and the finalist, NCU veto)
#   the tuner on softmax without profiling
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
RUN_LIMIT=250 run_opt softmax_strict softmax --provider replay --replay-dir examples/softmax/candidates \
  --max-rounds 1 --candidates-per-round 2 --isolation strict --max-total-seconds 240
RUN_LIMIT=135 run_opt softmax_tune softmax --provider tune --max-rounds 10 --candidates-per-round 1 --no-profile \
  --max-total-seconds 125
cd "$OUT" && tar czf runs.tgz softmax_strict.log softmax_tune.log softmax_strict/run.json \
  softmax_strict/experiments.json softmax_strict/*_profile.json softmax_strict/experiments/*/result.json \
  softmax_tune/best_kernel.py softmax_tune/experiments.json 2>/dev/null || true
rm -rf "$OUT/softmax_strict" "$OUT/softmax_tune"
ls -la "$OUT"
