#!/usr/bin/env bash
# H200: --diagnostic-instrumentation end to end on vector_add with Proton scope markers (~4 min): baseline
# and finalist get Proton intra-kernel traces in their own workers, never benchmarked or used to decide.
source "$(dirname "$0")/common.sh"
RUN_LIMIT=240 run_opt va_instrumented vector_add --kernel examples/vector_add/h200/kernel_scoped.py \
  --provider tune --max-rounds 1 --candidates-per-round 1 --diagnostic-instrumentation --max-total-seconds 230
grep -h "diagnostic_instrumentation\|deep_profile" "$OUT/va_instrumented.log" | cut -c1-300 | tee -a "$OUT/summary.txt" || true
cd "$OUT" && tar czf runs.tgz va_instrumented.log va_instrumented/experiments/*/diagnostic_profile.json \
  va_instrumented/best_kernel.py 2>/dev/null || true
rm -rf "$OUT/va_instrumented"
ls -la "$OUT"
