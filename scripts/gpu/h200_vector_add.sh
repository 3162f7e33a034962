#!/usr/bin/env bash
# vector_add on the H200 with the h200/ bundle, replayed candidates, profiling on, end to end.
# Usage on the device host: bash scripts/gpu/h200_vector_add.sh   (writes under $OUT)
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
tlx doctor > "$OUT/doctor.json" 2> "$OUT/doctor.txt" || true
cat "$OUT/doctor.txt"
start=$(date +%s.%N)
set +e
tlx optimize --kernel examples/vector_add/kernel.py --harness examples/vector_add/harness.py \
  --cases examples/vector_add/h200/cases.json --target examples/vector_add/h200/target.json \
  --output-dir "$OUT/va_run" --provider replay --replay-dir examples/vector_add/candidates \
  --max-rounds 2 --no-commit-winner "$@" > "$OUT/va_result.json" 2> "$OUT/va_live.log"
code=$?
set -e
end=$(date +%s.%N)
echo "exit_code=$code wall_s=$(python3 -c "print(round($end-$start,1))")" | tee "$OUT/va_summary.txt"
python3 - "$OUT/va_result.json" <<'PY' | tee -a "$OUT/va_summary.txt"
import json, sys
r = json.load(open(sys.argv[1]))
r = json.load(open(r["result_json"])) if "result_json" in r else r  # stdout is the summary; this is the record
if "report" not in r:
    print("ERROR", r.get("error")); sys.exit(0)
print("stopping", r["stopping_reason"], "winner", r["winner_experiment_id"], "aggregate", r["report"]["aggregate_speedup"], "wall", round(r["wall_seconds"], 1))
for c in r["report"]["workload"]:
    print(f"{c['case_id']:<12} base={c['baseline_median_us']} final={c['final_median_us']} speedup={c['speedup']} cv={c['baseline_cv']}/{c['final_cv']}")
for e in r["experiments"]:
    d = e.get("decision") or {}
    print(f"{e['experiment_id']:<10} {d.get('status')} {d.get('reason','')[:150]}")
PY
