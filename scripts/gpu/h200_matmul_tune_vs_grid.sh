#!/usr/bin/env bash
# The tuner against a grid on the H200 (~7 min): the tuner on matmul, then the matmul grid over the
# same knobs (narrowed to launchable 64-256 tiles, 4/8 warps, 2-4 stages; compiled in parallel first) with
# the tuner's winner measured in the same process.
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
RUN_LIMIT=175 run_opt matmul_tune matmul --provider tune --max-rounds 10 --candidates-per-round 1 --no-profile \
  --max-total-seconds 165
timeout 250 python3 scripts/tuner_study.py --example matmul --tuned "$OUT/matmul_tune/best_kernel.py" --out "$OUT" \
  --seconds 235 --budget-seconds 0.1 --compile-workers 14 --skip-smem-over 227 \
  --values tile=64,128,256 warps=4,8 stages=2,3,4 group=1,8 2>&1 | tail -1 | cut -c1-900 | tee -a "$OUT/summary.txt" || true
cd "$OUT" && tar czf runs.tgz matmul_tune.log matmul_tune/best_kernel.py matmul_tune/experiments.json 2>/dev/null || true
rm -rf "$OUT/matmul_tune"
ls -la "$OUT"
