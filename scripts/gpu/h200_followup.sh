#!/usr/bin/env bash
# The H200 runs still owed by issues 3-6 (this session's device time ran out), in one batch (~9 min):
#   issue 3: vector_add with --isolation strict (all layers active, CUDA working)
#   issue 4: the measurement study with the learned noise floor, three examples
#   issue 5/6: softmax with the tuner and profiling until a finalist is revalidated (deep profiles)
#   issue 6: tuner-vs-grid for matmul with a longer cap
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
run_opt() {  # name example extra...
  local name=$1 example=$2; shift 2
  local t0=$(date +%s)
  timeout "${RUN_LIMIT:-240}" python3 -m orchestrator.cli optimize --kernel examples/$example/kernel.py \
    --harness examples/$example/harness.py --cases examples/$example/h200/cases.json \
    --target examples/$example/h200/target.json --output-dir "$OUT/$name" --no-commit-winner "$@" \
    > "$OUT/$name.json" 2> "$OUT/$name.log" || true
  echo "$name wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/summary.txt"
  grep -E "isolation mode|status=(promoted|rejected|revalidated|baseline|failed)|run finished|error" "$OUT/$name.log" \
    | sed 's/ case=.* decision=/ decision=/' | cut -c1-220 | tee -a "$OUT/summary.txt"
}
RUN_LIMIT=150 run_opt va_strict vector_add --provider replay --replay-dir examples/vector_add/candidates \
  --max-rounds 1 --candidates-per-round 1 --isolation strict
python3 scripts/measurement_study.py --out "$OUT/study" --processes 3 --blocks 5 --budget-seconds 0.15 2>&1 \
  | tail -5 | tee -a "$OUT/summary.txt"
RUN_LIMIT=200 run_opt softmax_tune softmax --provider tune --max-rounds 3 --candidates-per-round 1 --max-total-seconds 190
timeout 120 python3 scripts/tuner_study.py --example matmul --out "$OUT" --seconds 100 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
mkdir -p "$OUT/keep" && cp "$OUT"/study/runs_*.json "$OUT/keep/" 2>/dev/null || true
tar czf "$OUT/runs.tgz" -C "$OUT" keep va_strict.log softmax_tune.log 2>/dev/null || true
rm -rf "$OUT/va_strict" "$OUT/softmax_tune" "$OUT/study" "$OUT/keep"
