#!/usr/bin/env bash
# The GPU-only dishonest candidates (tests/cheats/gpu_candidates/vector_add) and the CPU corpus's protocol takeover
# (EXTRA: names from tests/cheats/candidates/vector_add, default the protocol takeover and the seed regeneration)
# through the real CLI at default promotion settings, on the vector_add H200 target (MODE=auto, the default: the
# judge; MODE=candidate: verdicts in the candidate's process, for comparison), cases n16M (events) and a ragged
# 262147 (short enough for CUDA graphs). The candidates are replayed in batches of BATCH (default 4), one optimize
# run per batch, in the order of their file names. One line per candidate: promoted or not, and what stopped it.
#   Usage on the device host: [MODE=auto|candidate] [ONLY="a b"] [BATCH=4] bash scripts/gpu/h200_cheats.sh
#   (a batch of four fits one 10-minute device command: about 45 s of baseline and up to 90 s a candidate)
source "$(dirname "$0")/common.sh"
mode=${MODE:-auto}
batch_size=${BATCH:-4}
gpu_facts | tee "$OUT/gpu.txt"
target=$(verdict_target vector_add "$mode")
corpus=()
extra=()
for name in ${EXTRA:-protocol_takeover_environ_fd regenerate_inputs_from_seed}; do
  extra+=("tests/cheats/candidates/vector_add/$name.py")
done
for source in tests/cheats/gpu_candidates/vector_add/*.py "${extra[@]}"; do
  name=$(basename "$source" .py)
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
  corpus+=("$source")
done
batch=0
for ((start = 0; start < ${#corpus[@]}; start += batch_size)); do
  batch=$((batch + 1))
  replay="/tmp/cheat-replay/$mode-$batch"
  rm -rf "$replay"; mkdir -p "$replay"
  index=0
  for source in "${corpus[@]:start:batch_size}"; do
    index=$((index + 1))
    file=$(printf "%03d" "$index")
    cp "$source" "$replay/$file.py"
    python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); m.pop("expected_catch", None); json.dump(m, open(sys.argv[2], "w"))' \
      "${source%.py}.json" "$replay/$file.json"  # the sidecar's note for readers
    echo "$file $(basename "$source" .py)" >> "$replay/names.txt"
  done
  rounds=$(( (index + 1) / 2 ))
  limit=${RUN_LIMIT:-560}
  RUN_LIMIT="$limit" CASES=tests/cheats/gpu_cases/vector_add.json TARGET="$target" \
    run_opt "cheats-$mode-$batch" vector_add --provider replay --replay-dir "$replay" --max-rounds "$rounds" \
    --max-total-seconds $((limit - 45))
  python3 - "$OUT/cheats-$mode-$batch.json" "$replay/names.txt" "$mode" <<'PY' | tee -a "$OUT/cheats.txt"
import json, sys
path, names_path, mode = sys.argv[1:4]
names = dict(line.split() for line in open(names_path) if line.strip())
try:
    r = json.load(open(path))
    r = json.load(open(r["result_json"])) if "result_json" in r else r  # stdout is the summary; this is the record
except Exception as exc:
    print(f"batch {mode}: NO RESULT {exc}"); sys.exit(0)
if "report" not in r:
    print(f"batch {mode}: ERROR {str(r.get('error'))[:300]}"); sys.exit(0)
slots = [e for e in r["experiments"] if e["experiment_id"].startswith("r")]
for number, experiment in zip(sorted(names), slots):
    decision = experiment.get("decision") or {}
    failed = next((ev.get("reason") for ev in experiment["evaluations"] if ev.get("status") not in ("ok", None)), None)
    promoted = decision.get("status") == "promoted"
    print(f"cheat {mode} {names[number]}: {'PROMOTED' if promoted else 'not promoted'} "
          f"status={decision.get('status')} speedup={experiment.get('aggregate_speedup')} :: "
          f"{str(failed or decision.get('reason', ''))[:240]}")
for number in sorted(names)[len(slots):]:
    print(f"cheat {mode} {names[number]}: NOT RUN (the batch ended first: {r['stopping_reason']})")
print(f"batch {mode}: exit={r['exit_code']} winner={r['winner_experiment_id']} wall={r['wall_seconds']:.0f}s")
PY
done
echo "== cheats"; cat "$OUT/cheats.txt"
