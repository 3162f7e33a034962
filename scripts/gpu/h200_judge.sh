#!/usr/bin/env bash
# Issue 12 on the H200: the GPU judge (record in the candidate's process, replay in the judge's).
# Usage on the device host: bash scripts/gpu/h200_judge.sh smoke|table   (writes under $OUT)
#   smoke: validate vector_add and replay the vector_add and softmax example candidates, judged
#   table: the examples' honest candidates, judged and in process (a harness copy without JUDGE), side by side
source "$(dirname "$0")/common.sh"
mode=${1:-smoke}
gpu_facts | tee "$OUT/gpu.txt"
inprocess_copy() {  # EXAMPLE -> a copy of the example with its harness's JUDGE removed (the pre-judge path)
  local dir="/tmp/inprocess/$1"
  mkdir -p "$dir"
  cp -r "examples/$1/." "$dir/"
  printf '\nJUDGE = None  # h200_judge.sh: the harness judges in the candidate'"'"'s process (before issue 12)\n' >> "$dir/harness.py"
  echo "$dir"
}
run_pair() {  # NAME EXAMPLE HARNESS ARGS...
  local name=$1 example=$2 harness=$3; shift 3
  local t0; t0=$(date +%s)
  timeout "${RUN_LIMIT:-300}" python3 -m orchestrator.cli optimize --kernel "examples/$example/kernel.py" \
    --harness "$harness" --cases "examples/$example/h200/cases.json" \
    --target "examples/$example/h200/target.json" --output-dir "$OUT/$name" --no-commit-winner "$@" \
    > "$OUT/$name.json" 2> "$OUT/$name.log" || true
  echo "$name wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/summary.txt"
  summary "$name" "$OUT/$name.json"
  grep -E "verdict process|status=cheat|replay" "$OUT/$name.log" | cut -c1-300 | head -5 | tee -a "$OUT/summary.txt" || true
}
case "$mode" in
  smoke)
    run_validate vector_add 1
    grep -E "verdict|judge" "$OUT/validate-vector_add-1.log" | head -5 | tee -a "$OUT/summary.txt" || true
    RUN_LIMIT=240 run_pair va_judged vector_add examples/vector_add/harness.py --provider replay \
      --replay-dir examples/vector_add/candidates --max-rounds 3
    RUN_LIMIT=240 run_pair sm_judged softmax examples/softmax/harness.py --provider replay \
      --replay-dir examples/softmax/candidates --max-rounds 2
    ;;
  table)
    for example in vector_add softmax; do
      copy=$(inprocess_copy $example)
      run_pair "${example}_judged" $example "examples/$example/harness.py" --provider replay \
        --replay-dir "examples/$example/candidates" --max-rounds 3
      run_pair "${example}_inprocess" $example "$copy/harness.py" --provider replay \
        --replay-dir "examples/$example/candidates" --max-rounds 3
    done
    ;;
esac
# worker logs of failures travel back in one archive
tar -czf /tmp/judge_runs.tgz -C "$OUT" . 2>/dev/null || true
echo "== summary"; cat "$OUT/summary.txt"
