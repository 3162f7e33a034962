#!/usr/bin/env bash
# The main job on examples/vector_add in the Triton CPU interpreter:
#   1. replayed candidates: one faster (promoted), one incorrect and one duplicate (both rejected);
#   2. the offline tuner (--provider tune) searching the kernel's knobs from measured evidence. It starts from
#      the kernel file as stage 1 left it: the replay winner, committed there (the original if none won).
# The kernel is copied into a throwaway git checkout under runs/ so the checkpoint commit is real
# without touching this repository. Prints where the results are. It runs at the default flags: the kernel's
# CPU-interpreter target gets the interpreter's stated CV gate (2.0; GPU targets keep 0.10, docs/measurement.md).
# Speedups: each experiment's is against the incumbent of that moment (its parent); the final revalidation's
# and the stage's aggregate are against that stage's baseline, the kernel the stage started from.
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
  echo "[demo] $name: live log follows; summary -> $demo/$name.json, full result -> $demo/$name/result.json" >&2
  set +e
  .venv/bin/tlx-agent optimize \
    --kernel "$checkout/kernel.py" \
    --harness examples/vector_add/harness.py \
    --cases examples/vector_add/cases.json \
    --target examples/vector_add/target.json \
    --output-dir "$demo/$name" \
    --max-rounds "${DEMO_ROUNDS:-2}" --candidates-per-round 2 \
    --max-candidate-seconds 120 --max-total-seconds 900 \
    "$@" > "$demo/$name.json"
  local code=$?
  set -e
  echo "[demo] $name finished with exit code $code" >&2
  return $code
}

run replay --provider replay --replay-dir examples/vector_add/candidates
echo "[demo] tune starts from $checkout/kernel.py as the replay stage committed it" >&2
DEMO_ROUNDS="${DEMO_TUNE_ROUNDS:-2}" run tune --provider tune --no-commit-winner || [ $? -eq 2 ]

.venv/bin/python - "$demo" <<'PY'
import hashlib
import json
import sys
import textwrap
from pathlib import Path

demo = Path(sys.argv[1])
results = {name: json.loads((demo / name / "result.json").read_text()) for name in ("replay", "tune")}


def times(value):
    return "-" if not value else f"{value:.3f}x"  # none, or 0 for an incorrect candidate: no speedup to show


def stage(name, result, baseline):
    report = result["report"]
    print(f"{name}: stopped: {result['stopping_reason']}: {result.get('stopping_detail') or '-'}")
    if result["winner_experiment_id"] == "baseline":
        print(f"  no revalidated winner: the stage keeps {baseline}; commit: {report['commit'] or '-'}")
    else:
        print(f"  winner {result['winner_experiment_id']}: {times(report['aggregate_speedup'])} against {baseline} "
              f"(revalidated next to fresh runs of it); commit: {report['commit'] or '-'}")
    for exp in result["experiments"]:
        decision = exp.get("decision") or {}
        status, reason = decision.get("status", "?"), decision.get("reason", "")
        if exp["experiment_id"] == "baseline":
            print(f"    baseline   measured    {baseline}")
            continue
        against = "the baseline" if exp["experiment_id"] == "final" else f"the incumbent {exp['parent_id']}"
        print(f"    {exp['experiment_id']:<10} {status:<11} {times(exp.get('aggregate_speedup')):>8} against "
              f"{against:<27} {textwrap.shorten(reason, 90, placeholder=' ...')}")


replay, tune = results["replay"], results["tune"]
stage("replay", replay, "the original kernel")
tune_start = tune["experiments"][0]["source_sha256"]
replay_end = hashlib.sha256(Path(replay["best_kernel_path"]).read_bytes()).hexdigest()
revisions = [c["revision"] for c in replay["commits"] if c["status"] == "committed" and c["revision"]]
if replay["winner_experiment_id"] != "baseline" and tune_start == replay_end:
    start = (f"the replay stage's winner {replay['winner_experiment_id']}, "
             + (f"as committed to the checkout (revision {revisions[-1][:12]})" if revisions
                else f"left in the checkout without a commit ({replay['report']['commit'] or '-'})"))
elif replay["winner_experiment_id"] == "baseline" and tune_start == replay_end:
    start = "the original kernel (the replay stage kept it)"
else:
    start = "a kernel that is not the replay stage's result (the checkout changed between the stages)"
print(f"tune starts from {start}; its speedups are against that, not against the original kernel")
stage("tune", tune, "its baseline, the kernel it started from")
print(f"results: {demo}/replay/result.json and {demo}/tune/result.json (live logs: live.log beside them)")
print(f"committed checkout: {demo}/checkout (git log shows the checkpoint commit)")
PY
