#!/usr/bin/env bash
# The tuner and diagnostic instrumentation on the H200 (~9 min): the tuner on matmul and softmax
# (no profiling, as before), then vector_add with --diagnostic-instrumentation (Proton intra-kernel traces
# for the baseline and the finalist in their own workers, never used for a decision).
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
RUN_LIMIT=180 run_opt matmul_tune matmul --provider tune --max-rounds 12 --candidates-per-round 1 --no-profile \
  --max-total-seconds 170
RUN_LIMIT=150 run_opt softmax_tune softmax --provider tune --max-rounds 12 --candidates-per-round 1 --no-profile \
  --max-total-seconds 140
RUN_LIMIT=200 run_opt va_instrumented vector_add --provider replay --replay-dir examples/vector_add/candidates \
  --max-rounds 1 --candidates-per-round 1 --diagnostic-instrumentation --max-total-seconds 190
grep -h "diagnostic_instrumentation" "$OUT/va_instrumented.log" | cut -c1-300 | tee -a "$OUT/summary.txt" || true
cd "$OUT" && tar czf runs.tgz matmul_tune.log softmax_tune.log va_instrumented.log matmul_tune/best_kernel.py \
  softmax_tune/best_kernel.py va_instrumented/experiments/*/diagnostic_profile.json \
  2>/dev/null || true
rm -rf "$OUT/matmul_tune" "$OUT/softmax_tune" "$OUT/va_instrumented"
ls -la "$OUT"
