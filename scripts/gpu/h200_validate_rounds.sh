#!/usr/bin/env bash
# `tlx-agent validate` at default settings on each example's h200/ bundle, ROUNDS times in turn
# (vector_add, softmax, matmul, then again), printing each case's within-worker CVs and worker spread.
#   Usage on the device host: ROUNDS=3 FIRST_ROUND=3 bash scripts/gpu/h200_validate_rounds.sh
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
first="${FIRST_ROUND:-1}"
for round in $(seq "$first" $(( first + ${ROUNDS:-3} - 1 ))); do
  for ex in vector_add softmax matmul; do
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
    rm -rf "$OUT/validate-$ex-$round" "$OUT/validate-$ex-$round.log"
  done
done
