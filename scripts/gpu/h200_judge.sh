#!/usr/bin/env bash
# The GPU judge on the H200 (record in the candidate's process, replay in the judge's).
# Usage on the device host: [EXAMPLES="vector_add softmax matmul"] bash scripts/gpu/h200_judge.sh smoke|table
#   (writes under $OUT)
#   smoke: validate vector_add at the default target, and replay the vector_add and softmax example candidates
#   table: each example's honest replay candidates at the default target (`auto`: the judge) and with the
#          verdict in the candidate's process, side by side in one run: speedups and worker walls
source "$(dirname "$0")/common.sh"
mode=${1:-smoke}
gpu_facts | tee "$OUT/gpu.txt"
verdicts() {  # NAME: where the verdicts were computed, and anything the judge refused or caught
  grep -E "verdict process|verdict_fallback|status=cheat" "$OUT/$1.log" | cut -c1-300 | head -6 | tee -a "$OUT/summary.txt" || true
}
case "$mode" in
  smoke)
    run_validate vector_add default
    verdicts validate-vector_add-default
    for example in ${EXAMPLES:-vector_add softmax}; do
      RUN_LIMIT=240 run_opt "${example}_auto" $example --provider replay \
        --replay-dir "examples/$example/candidates" --max-rounds 3
      verdicts "${example}_auto"
    done
    ;;
  table)
    for example in ${EXAMPLES:-vector_add softmax matmul}; do
      run_opt "${example}_auto" $example --provider replay \
        --replay-dir "examples/$example/candidates" --max-rounds 3
      verdicts "${example}_auto"
      TARGET=$(verdict_target $example candidate) run_opt "${example}_candidate" \
        $example --provider replay --replay-dir "examples/$example/candidates" --max-rounds 3
      verdicts "${example}_candidate"
    done
    ;;
esac
echo "== summary"; cat "$OUT/summary.txt"
