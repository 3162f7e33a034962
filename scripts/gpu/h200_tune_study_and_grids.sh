#!/usr/bin/env bash
# One batch of H200 runs: softmax with the offline tuner under --isolation strict with
# profiling (Proton + NCU), the measurement study, a matmul tune run and the tuner-vs-grid studies.
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
RUN_LIMIT=200 run_opt softmax_tune softmax --provider tune --max-rounds 1 --candidates-per-round 2 --isolation strict
python3 scripts/measurement_study.py --out "$OUT/study" --processes 2 --blocks 5 --budget-seconds 0.2 2>&1 | tail -6 | tee -a "$OUT/summary.txt"
RUN_LIMIT=90 run_opt matmul_tune matmul --provider tune --max-rounds 2 --candidates-per-round 1 --no-profile
for ex in softmax matmul; do
  timeout 50 python3 scripts/tuner_study.py --example $ex --tuned "$OUT/${ex}_tune/best_kernel.py" --out "$OUT" --seconds 30 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
done
grep -h "deep_profile\|isolation mode" "$OUT"/softmax_tune.log | cut -c1-300 | tee -a "$OUT/summary.txt"
rm -rf "$OUT"/softmax_tune/experiments/*/workers "$OUT"/matmul_tune/experiments/*/workers
tar czf "$OUT/runs.tgz" -C "$OUT" softmax_tune matmul_tune 2>/dev/null || true
rm -rf "$OUT/softmax_tune" "$OUT/matmul_tune"
