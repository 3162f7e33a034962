#!/usr/bin/env bash
# The PID-namespace layer with CUDA, and validate's stability on the examples' H200 bundles (~8 min):
# doctor (every layer, processes included); vector_add replayed under --isolation strict with profiling on
# (NCU and Proton children run inside each worker's PID namespace); then `tlx-agent validate` at default
# settings twice on each example's h200/ bundle, printing each case's worst within-worker CV and the spread
# of the three workers' medians.
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
tlx doctor --isolation strict > "$OUT/doctor.json" 2> "$OUT/doctor.txt" || true
cat "$OUT/doctor.txt"
RUN_LIMIT=200 run_opt va_strict vector_add --provider replay --replay-dir examples/vector_add/candidates \
  --max-rounds 1 --candidates-per-round 1 --isolation strict --max-total-seconds 190
for round in 1 2; do
  for ex in matmul softmax vector_add; do
    t0=$(date +%s)
    timeout 120 python3 -m orchestrator.cli validate --kernel "examples/$ex/kernel.py" --harness "examples/$ex/harness.py" \
      --cases "examples/$ex/h200/cases.json" --target "examples/$ex/h200/target.json" --arch h200 \
      --output-dir "$OUT/validate-$ex-$round" > "$OUT/validate-$ex-$round.json" 2> "$OUT/validate-$ex-$round.log" || true
    python3 - "$OUT/validate-$ex-$round.json" "$ex-$round" "$(( $(date +%s) - t0 ))" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
path, name, wall = sys.argv[1:4]
try:
    lock = json.load(open(path))
except Exception as exc:
    print(name, "no lock", exc); sys.exit(0)
if "checks" not in lock:
    print(name, "ERROR", lock.get("error")); sys.exit(0)
failed = [c["name"] + ": " + c["message"][:160] for c in lock["checks"] if c["status"] == "failed"]
rows = ", ".join(f"{r['case_id']} cvs {[round(c, 4) for c in r['cvs']]} spread {r['median_spread']:.4f}"
                 for r in lock.get("stability", []))
print(f"validate {name}: passed={lock['passed']} wall_s={wall} {rows}")
for line in failed:
    print("   FAILED", line)
PY
  done
done
cd "$OUT" && tar czf logs.tgz ./*.log va_strict/run.json va_strict/result.json 2>/dev/null || true
rm -rf "$OUT"/validate-* "$OUT/va_strict" "$OUT"/*.log
cat "$OUT/summary.txt"
