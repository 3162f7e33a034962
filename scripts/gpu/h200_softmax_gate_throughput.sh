#!/usr/bin/env bash
# How many candidates the gate measures in about ten minutes on the softmax example (docs/performance.md), one
# optimize run at BUDGET seconds (default 555, what fits one 600 s device command with the install), then
# scripts/gate_cost.py's table, the fork server's line, and per worker the candidate's first kernel call, the
# judge's kernel load and the launchers the run kept. MODE picks the candidates:
#   tune    `--provider tune` from the untouched kernel: screened candidates, as many as the search sends;
#   replay  (default) `--provider replay` over 80 configurations of the knob grid (scripts/grid_candidates.py)
#           from the kernel at 1024 / 2 warps / 2 stages, the tuner's winner on the H200 and the H100: candidates
#           a little slower or no faster, what a search gates once it has its first winner, as many as the gate
#           can take. No screening compiled them, so the run compiles each ahead before its worker (an upper
#           bound on what a screened one costs).
#   MODE=tune bash scripts/gpu/h200_softmax_gate_throughput.sh        (everything under $OUT, summary.txt last)
source "$(dirname "$0")/common.sh"
set +e
BUDGET="${BUDGET:-555}"
gpu_facts | tee -a "$OUT/summary.txt"
MODE="${MODE:-replay}"
if [ "$MODE" = tune ]; then
  RUN_LIMIT=$((BUDGET + 25)) run_opt softmax_tune softmax --provider tune --max-total-seconds "$BUDGET" --max-rounds 1000
else
  softmax_grid 80
  KERNEL=/tmp/softmax-start.py RUN_LIMIT=$((BUDGET + 25)) run_opt softmax_tune softmax --provider replay \
    --replay-dir /tmp/softmax-grid --max-total-seconds "$BUDGET" --max-rounds 1000
fi
python3 scripts/gate_cost.py "$OUT/softmax_tune" | tee -a "$OUT/summary.txt"
grep -h "worker start: forked" "$OUT/softmax_tune.log" | cut -c1-200 | tee -a "$OUT/summary.txt"
python3 - "$OUT/softmax_tune/result.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, statistics, sys
result = json.load(open(sys.argv[1]))
rows = []
for experiment in result["experiments"]:
    for evaluation in experiment["evaluations"]:
        if not evaluation["cases"] or evaluation["label"] not in ("candidate", "incumbent", "baseline"):
            continue
        metrics = evaluation["cases"][0]["metrics"]
        rows.append((evaluation["worker"].get("launchers_kept", 0),
                     metrics.get("verify.record_first.candidate_warm_call_seconds"),
                     metrics.get("verify.kernel_load_seconds"), evaluation["worker"]["wall_seconds"]))
calls = [r[1] for r in rows if r[1] is not None]
loads = [r[2] for r in rows if r[2] is not None]
print(f"workers={len(rows)} launchers_kept={sum(r[0] for r in rows)} "
      f"median_first_call_s={statistics.median(calls):.3f} median_kernel_load_s={statistics.median(loads):.3f} "
      f"median_worker_s={statistics.median(r[3] for r in rows):.2f}")
PY
gzip -c "$OUT/softmax_tune/result.json" > "$OUT/softmax_tune-result.json.gz" 2>/dev/null
gzip -c "$OUT/softmax_tune.log" > "$OUT/softmax_tune.log.gz" 2>/dev/null
rm -rf "${OUT:?}/softmax_tune"
