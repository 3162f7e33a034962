#!/usr/bin/env bash
# The PID-namespace layer with CUDA, and validate's stability on the examples' H200 bundles (~8 min):
# doctor (every layer, processes included); vector_add replayed under --isolation strict with profiling on
# (NCU and Proton children run inside each worker's PID namespace); then `tlx-agent validate` at default
# settings twice on each example's h200/ bundle, printing each case's worst within-worker CV and the spread
# of the three workers' medians.
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
tlx doctor --isolation strict > "$OUT/doctor.json" 2> "$OUT/doctor.txt" || true
cat "$OUT/doctor.txt"
RUN_LIMIT=200 run_opt va_strict vector_add --provider replay --replay-dir examples/vector_add/candidates \
  --max-rounds 1 --candidates-per-round 1 --isolation strict --max-total-seconds 190
for round in 1 2; do
  for ex in matmul softmax vector_add; do
    run_validate "$ex" "$round"
  done
done
cd "$OUT" && tar czf logs.tgz ./*.log va_strict/run.json va_strict/result.json 2>/dev/null || true
rm -rf "$OUT"/validate-* "$OUT/va_strict" "$OUT"/*.log
cat "$OUT/summary.txt"
