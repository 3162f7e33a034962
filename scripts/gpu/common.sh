# Sourced by the H200 scripts: install the carried wheels (the host has no package index) and set paths.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
# the wheels an earlier command installed serve a copy of the tree without .whl too (a background run's)
if [ -d /tmp/site ]; then
  export PYTHONPATH="/tmp/site:$root${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
OUT="${OUT:-$root/runs/gpu-$(date +%s)}"
mkdir -p "$OUT"
tlx() { python3 -m orchestrator.cli "$@"; }
gpu_facts() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader || true
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
}
# summary NAME RESULT_JSON: a run's outcome, per-case speedups and every decision with its workers' walls.
summary() {  # name result.json
  python3 - "$1" "$2" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
    r = json.load(open(r["result_json"])) if "result_json" in r else r  # stdout is the summary; this is the record
except Exception as exc:
    print(name, "no result", exc); sys.exit(0)
if "report" not in r:
    print(name, "ERROR", r.get("error")); sys.exit(0)
print(f"{name}: exit={r['exit_code']} stopping={r['stopping_reason']} winner={r['winner_experiment_id']} "
      f"aggregate={r['report']['aggregate_speedup']} wall={r['wall_seconds']:.1f}")
for c in r["report"]["workload"]:
    print(f"  {c['case_id']:<22} base={c['baseline_median_us']} final={c['final_median_us']} speedup={c['speedup']}")
    if c.get("copy_gap"):
        print(f"    copy_gap: {c['copy_gap']}")
for e in r["experiments"]:
    d = e.get("decision") or {}
    walls = ",".join(f"{ev['label']}:{ev['worker']['wall_seconds']:.1f}" for ev in e["evaluations"])
    print(f"  {e['experiment_id']:<10} {d.get('status')} [{walls}] {d.get('reason','')[:110]}")
PY
}
# verdict_target EXAMPLE MODE: the path of a copy of the example's h200 target.json with "verdict_process" MODE
# (judge, candidate or auto), for TARGET=.
verdict_target() {
  local path="/tmp/verdict-targets/$1-$2.json"
  mkdir -p /tmp/verdict-targets
  python3 - "examples/$1/h200/target.json" "$path" "$2" <<'PY'
import json, sys
target = json.load(open(sys.argv[1]))
target["verdict_process"] = sys.argv[3]
json.dump(target, open(sys.argv[2], "w"), indent=2)
PY
  echo "$path"
}
# softmax_grid COUNT: COUNT configurations of the softmax example's knob grid as replay candidates in
# /tmp/softmax-grid, edits of the example at 1024 / 2 warps / 2 stages (the tuner's winner on the H200 and the
# H100), which is written to /tmp/softmax-start.py (the run's KERNEL)
softmax_grid() {
  python3 scripts/grid_candidates.py --kernel examples/softmax/kernel.py --start BLOCK_SIZE=1024 NUM_WARPS=2 \
    NUM_STAGES=2 --start-out /tmp/softmax-start.py --out /tmp/softmax-grid --count "$1" | tee -a "$OUT/summary.txt"
}
# run_opt NAME EXAMPLE ARGS...: one optimize run on the example's h200 bundle into $OUT/NAME (no commit; KERNEL, HARNESS,
# CASES and TARGET override the example's kernel.py and the bundle's harness.py, h200/cases.json and h200/target.json),
# killed after $RUN_LIMIT seconds; its decisions go to $OUT/summary.txt.
run_opt() {
  local name=$1 example=$2; shift 2
  local t0
  t0=$(date +%s)
  timeout "${RUN_LIMIT:-240}" python3 -m orchestrator.cli optimize --kernel "${KERNEL:-examples/$example/kernel.py}" \
    --harness "${HARNESS:-examples/$example/harness.py}" --cases "${CASES:-examples/$example/h200/cases.json}" \
    --target "${TARGET:-examples/$example/h200/target.json}" --output-dir "$OUT/$name" --no-commit-winner "$@" \
    > "$OUT/$name.json" 2> "$OUT/$name.log" || true
  echo "$name wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/summary.txt"
  summary "$name" "$OUT/$name.json"
  grep -E "isolation mode|status=confirming" "$OUT/$name.log" | cut -c1-260 | tee -a "$OUT/summary.txt" || true
}
# run_validate EXAMPLE ROUND: `tlx-agent validate` at default settings on the example's h200/ bundle (TARGET
# overrides its target.json) into
# $OUT/validate-EXAMPLE-ROUND; appends one line per run to $OUT/summary.txt (each case's within-worker CVs
# and the spread of the worker medians, and any failed check).
run_validate() {
  local example=$1 round=$2 t0
  t0=$(date +%s)
  timeout "${VALIDATE_LIMIT:-240}" python3 -m orchestrator.cli validate --kernel "examples/$example/kernel.py" \
    --harness "examples/$example/harness.py" --cases "examples/$example/h200/cases.json" \
    --target "${TARGET:-examples/$example/h200/target.json}" --arch h200 --output-dir "$OUT/validate-$example-$round" \
    > "$OUT/validate-$example-$round.json" 2> "$OUT/validate-$example-$round.log" || true
  python3 - "$OUT/validate-$example-$round.json" "$example-$round" "$(( $(date +%s) - t0 ))" <<'PY' | tee -a "$OUT/summary.txt"
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
}
