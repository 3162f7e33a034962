#!/usr/bin/env bash
# One batched H200 session for issues 3-6: softmax with the offline tuner under --isolation strict with
# profiling (Proton + NCU), the measurement study, a matmul tune run and the tuner-vs-grid studies.
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
summary() {  # name result.json
  python3 - "$1" "$2" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except Exception as exc:
    print(name, "no result", exc); sys.exit(0)
if "report" not in r:
    print(name, "ERROR", r.get("error")); sys.exit(0)
print(f"{name}: exit={r['exit_code']} stopping={r['stopping_reason']} winner={r['winner_experiment_id']} "
      f"aggregate={r['report']['aggregate_speedup']} wall={r['wall_seconds']:.1f}")
for c in r["report"]["workload"]:
    print(f"  {c['case_id']:<22} base={c['baseline_median_us']} final={c['final_median_us']} speedup={c['speedup']}")
for e in r["experiments"]:
    d = e.get("decision") or {}
    walls = ",".join(f"{ev['label']}:{ev['worker']['wall_seconds']:.1f}" for ev in e["evaluations"])
    print(f"  {e['experiment_id']:<10} {d.get('status')} [{walls}] {d.get('reason','')[:110]}")
PY
}
run_opt() {  # name example extra...
  local name=$1 example=$2; shift 2
  local t0=$(date +%s)
  timeout "${RUN_LIMIT:-240}" python3 -m orchestrator.cli optimize --kernel examples/$example/kernel.py \
    --harness examples/$example/harness.py --cases examples/$example/h200/cases.json \
    --target examples/$example/h200/target.json --output-dir "$OUT/$name" --no-commit-winner "$@" \
    > "$OUT/$name.json" 2> "$OUT/$name.log" || true
  echo "$name wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/summary.txt"
  summary "$name" "$OUT/$name.json"
}
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
