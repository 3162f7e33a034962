#!/usr/bin/env bash
# Runs the README's example (the demo's replay stage on examples/vector_add, the demo's flags, no --max-cv)
# N times, one after another, each in a fresh throwaway git checkout, and tallies the exit codes.
#   Usage: scripts/repeat_readme_example.sh [N=10] [OUT_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
runs="${1:-10}"
out="${2:-$(mktemp -d -t tlx-readme-example.XXXXXX)}"
mkdir -p "$out"
for i in $(seq 1 "$runs"); do
  checkout="$out/checkout-$i"
  mkdir -p "$checkout"
  cp examples/vector_add/kernel.py "$checkout/kernel.py"
  git -C "$checkout" init -q && git -C "$checkout" add kernel.py
  git -C "$checkout" -c user.name=demo -c user.email=demo@localhost commit -q -m "vector_add baseline"
  start=$(date +%s)
  set +e
  .venv/bin/tlx-agent optimize --kernel "$checkout/kernel.py" --harness examples/vector_add/harness.py \
    --cases examples/vector_add/cases.json --target examples/vector_add/target.json --output-dir "$out/run-$i" \
    --max-rounds 2 --candidates-per-round 2 --max-candidate-seconds 120 --max-total-seconds 900 \
    --provider replay --replay-dir examples/vector_add/candidates > "$out/run-$i.json" 2> "$out/run-$i.log"
  code=$?
  set -e
  .venv/bin/python - "$out/run-$i.json" "$i" "$code" "$(( $(date +%s) - start ))" <<'PY'
import json, sys
path, index, code, wall = sys.argv[1:5]
result = json.load(open(path))
result = json.load(open(result["result_json"])) if "result_json" in result else result  # stdout: the summary
report = result.get("report") or {}
final = next((e for e in result.get("experiments", []) if e["experiment_id"] == "final"), {})
print(f"run {index}: exit={code} wall_s={wall} winner={result.get('winner_experiment_id')} "
      f"speedup={report.get('aggregate_speedup')} final={(final.get('decision') or {}).get('status')} "
      f"stopping={result.get('stopping_reason')} {result.get('error', '')}")
PY
done | tee "$out/summary.txt"
echo "exit codes: $(grep -o 'exit=[0-9]*' "$out/summary.txt" | sort | uniq -c | tr '\n' ' ')"
