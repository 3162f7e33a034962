#!/usr/bin/env bash
# The main job on examples/vector_add in the Triton CPU interpreter:
#   1. replayed candidates: one faster (promoted), one incorrect and one duplicate (both rejected);
#   2. the offline tuner (--provider tune) searching the kernel's knobs from measured evidence.
# The kernel is copied into a throwaway git checkout under runs/ so the checkpoint commit is real
# without touching this repository. Prints where the results are. Interpreter timings on a shared CPU are
# noisy, so the demo relaxes the CV gate (--max-cv 1.0); GPU runs keep the seed's 0.10.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup_env.sh
stamp="$(date +%Y%m%d-%H%M%S)-$$"
demo="$root/runs/demo-$stamp"
checkout="$demo/checkout"
mkdir -p "$checkout"
cp examples/vector_add/kernel.py "$checkout/kernel.py"
git -C "$checkout" init -q
git -C "$checkout" add kernel.py
git -C "$checkout" -c user.name=demo -c user.email=demo@localhost commit -q -m "vector_add baseline"

run() {
  local name="$1"; shift
  echo "[demo] $name: live log follows; result JSON -> $demo/$name.json" >&2
  set +e
  .venv/bin/tlx-agent optimize \
    --kernel "$checkout/kernel.py" \
    --harness examples/vector_add/harness.py \
    --cases examples/vector_add/cases.json \
    --target examples/vector_add/target.json \
    --output-dir "$demo/$name" \
    --max-rounds "${DEMO_ROUNDS:-2}" --candidates-per-round 2 \
    --max-candidate-seconds 120 --max-total-seconds 900 --max-cv "${DEMO_MAX_CV:-1.0}" \
    "$@" > "$demo/$name.json"
  local code=$?
  set -e
  echo "[demo] $name finished with exit code $code" >&2
  return $code
}

run replay --provider replay --replay-dir examples/vector_add/candidates
DEMO_ROUNDS="${DEMO_TUNE_ROUNDS:-2}" run tune --provider tune --no-commit-winner || [ $? -eq 2 ]

.venv/bin/python - "$demo" <<'PY'
import json, sys
demo = sys.argv[1]
for name in ("replay", "tune"):
    result = json.load(open(f"{demo}/{name}.json"))
    report = result["report"]
    print(f"{name}: stopping_reason={result['stopping_reason']} winner={result['winner_experiment_id']} "
          f"aggregate_speedup={report['aggregate_speedup']} commit={report['commit']!r}")
    for exp in result["experiments"]:
        decision = exp.get("decision") or {}
        print(f"  {exp['experiment_id']:<10} {decision.get('status', '?'):<11} {decision.get('reason', '')[:110]}")
print(f"results: {demo}/replay/result.json and {demo}/tune/result.json (live logs: live.log beside them)")
print(f"committed checkout: {demo}/checkout (git log shows the checkpoint commit)")
PY
