#!/usr/bin/env bash
# Issue 12 on the H200: the GPU judge (record in the candidate's process, replay in the judge's).
# Usage on the device host: bash scripts/gpu/h200_judge.sh smoke|table   (writes under $OUT)
#   smoke: validate vector_add judged, and replay the vector_add and softmax example candidates, judged
#   table: the examples' honest candidates judged and in the candidate's process, side by side
# Judged runs use a copy of the example's h200 target with "verdict_process": "judge" (the GPU default is
# still the candidate's process until this script's table says otherwise).
source "$(dirname "$0")/common.sh"
mode=${1:-smoke}
gpu_facts | tee "$OUT/gpu.txt"
verdicts() {  # NAME: where the verdicts were computed, and anything the judge refused or caught
  grep -E "verdict process|status=cheat|replay|record" "$OUT/$1.log" | cut -c1-300 | head -6 | tee -a "$OUT/summary.txt" || true
}
case "$mode" in
  smoke)
    TARGET=$(verdict_target vector_add judge) run_validate vector_add judged
    verdicts validate-vector_add-judged
    for example in vector_add softmax; do
      TARGET=$(verdict_target $example judge) RUN_LIMIT=240 run_opt "${example}_judged" $example --provider replay \
        --replay-dir "examples/$example/candidates" --max-rounds 3
      verdicts "${example}_judged"
    done
    ;;
  table)
    for example in vector_add softmax; do
      TARGET=$(verdict_target $example judge) run_opt "${example}_judged" $example --provider replay \
        --replay-dir "examples/$example/candidates" --max-rounds 3
      verdicts "${example}_judged"
      run_opt "${example}_candidate" $example --provider replay --replay-dir "examples/$example/candidates" \
        --max-rounds 3
      verdicts "${example}_candidate"
    done
    ;;
esac
echo "== summary"; cat "$OUT/summary.txt"
