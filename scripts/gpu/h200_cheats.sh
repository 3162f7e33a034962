#!/usr/bin/env bash
# Issue 12 on the H200: the GPU-only dishonest candidates (tests/cheats/gpu_candidates/vector_add, and the CPU
# corpus's protocol takeover, which won 12.3x on the H200 before the judge) each run
# through the real CLI at default promotion settings and the example's own target (MODE=auto, the default: the
# judge), or with the verdict in the candidate's process (MODE=candidate), on two cases: n16M (timed with events) and a ragged 262147
# (short enough for CUDA graphs). One line per candidate: promoted or not, and what stopped it.
#   Usage on the device host: [MODE=auto|judge|candidate] [ONLY="a b"] bash scripts/gpu/h200_cheats.sh
#   (ONLY: file names without .py, e.g. "side_stream protocol_takeover_environ_fd")
source "$(dirname "$0")/common.sh"
mode=${MODE:-auto}
gpu_facts | tee "$OUT/gpu.txt"
target=$(verdict_target vector_add "$mode")
corpus=(tests/cheats/gpu_candidates/vector_add/*.py tests/cheats/candidates/vector_add/protocol_takeover_environ_fd.py)
for source in "${corpus[@]}"; do
  name=$(basename "$source" .py)
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
  replay="/tmp/cheat-replay/$name"
  mkdir -p "$replay"
  cp "$source" "$replay/001.py"
  python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); m.pop("expected_catch", None); json.dump(m, open(sys.argv[2], "w"))' \
    "${source%.py}.json" "$replay/001.json"  # the sidecar's note for readers
  t0=$(date +%s)
  RUN_LIMIT="${RUN_LIMIT:-150}" CASES=tests/cheats/gpu_cases/vector_add.json TARGET="$target" run_opt "cheat-$mode-$name" vector_add \
    --provider replay --replay-dir "$replay" --max-total-seconds 140
  python3 - "$OUT/cheat-$mode-$name.json" "$name" "$mode" "$(( $(date +%s) - t0 ))" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
path, name, mode, wall = sys.argv[1:5]
try:
    r = json.load(open(path))
except Exception as exc:
    print(f"cheat {mode} {name}: NO RESULT {exc}"); sys.exit(0)
if "report" not in r:
    print(f"cheat {mode} {name}: ERROR {str(r.get('error'))[:200]}"); sys.exit(0)
decisions = {e["experiment_id"]: e.get("decision") or {} for e in r["experiments"]}
c = decisions.get("r001-c000", {})
evaluations = [ev for e in r["experiments"] if e["experiment_id"] == "r001-c000" for ev in e["evaluations"]]
why = next((ev.get("reason") for ev in evaluations if ev.get("status") not in ("ok", None)), None) or c.get("reason", "")
promoted = r.get("winner_experiment_id") == "r001-c000"
print(f"cheat {mode} {name}: {'PROMOTED' if promoted else 'not promoted'} exit={r['exit_code']} "
      f"status={c.get('status')} wall_s={wall} :: {str(why)[:220]}")
PY
done
echo "== summary"; cat "$OUT/summary.txt"
