#!/usr/bin/env bash
# What a gated candidate costs on the H200 (docs/performance.md): the softmax and matmul examples tuned for 240 s
# each, then scripts/gate_cost.py's table (gated, triaged on one worker, median gated wall, verify and the first
# recording per worker) and the fork server's line (its imports and torch's dispatch warm-up, paid once).
#   bash scripts/gpu/h200_gate_cost.sh        (about 9 minutes; everything under $OUT, summary.txt last)
source "$(dirname "$0")/common.sh"
set +e
gpu_facts | tee -a "$OUT/summary.txt"
RUN_LIMIT=265 run_opt softmax_tune softmax --provider tune --max-total-seconds 240
RUN_LIMIT=265 run_opt matmul_tune matmul --provider tune --max-total-seconds 240
python3 scripts/gate_cost.py "$OUT/softmax_tune" "$OUT/matmul_tune" | tee -a "$OUT/summary.txt"
grep -h "worker start: forked" "$OUT/softmax_tune.log" "$OUT/matmul_tune.log" | cut -c1-200 | tee -a "$OUT/summary.txt"
# the records a later reading needs, small enough to come back; the rest stays on the host
for run in softmax_tune matmul_tune; do
  gzip -c "$OUT/$run/result.json" > "$OUT/$run-result.json.gz" 2>/dev/null
  gzip -c "$OUT/$run.log" > "$OUT/$run.log.gz" 2>/dev/null
  rm -rf "${OUT:?}/$run"
done
