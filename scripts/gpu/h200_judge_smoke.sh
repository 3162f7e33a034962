#!/usr/bin/env bash
# The judge end to end on this checkout, in one device command: the vector_add example's honest replay candidates
# at its H200 target (decisions, speedups, judged worker time and where verify went by step), then the dishonest
# candidates named in ONLY (tests/cheats/gpu_candidates/vector_add, default one of each category the judge closes:
# timing-mode steering, a cross-call memo, seed regeneration, profile evasion) in one batch through
# scripts/gpu/h200_cheats.sh. Meant for checking a change to the judge's own path (kernel loads, launchers) on
# the GPU before the longer corpus and before/after scripts.
#   Usage on the device host: [ONLY="a b"] [HONEST_LIMIT=220] [CHEAT_LIMIT=300] bash scripts/gpu/h200_judge_smoke.sh
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
RUN_LIMIT=${HONEST_LIMIT:-220} run_opt vector_add_honest vector_add --provider replay \
  --replay-dir examples/vector_add/candidates --max-rounds 3
python3 - "$OUT/vector_add_honest.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    r = json.load(open(r["result_json"])) if "result_json" in r else r
    steps = r["report"].get("verify_seconds") or {}
    walls = [ev["worker"]["wall_seconds"] for e in r["experiments"] for ev in e["evaluations"]]
    print(f"honest judged workers: n={len(walls)} sum={sum(walls):.1f} s")
    print("honest verify steps (s): " + " ".join(f"{k}={v:.2f}" for k, v in steps.items()))
except Exception as exc:  # noqa: BLE001 - a failed run is reported above by summary()
    print("honest run: no report", exc)
PY
export ONLY=${ONLY:-steer_graph_mode_fast_warmup memo_scratch_by_content profile_gap_evasion regenerate_inputs_from_seed}
EXTRA=${EXTRA:-regenerate_inputs_from_seed} BATCH=${BATCH:-4} RUN_LIMIT=${CHEAT_LIMIT:-300} \
  bash "$(dirname "$0")/h200_cheats.sh" > "$OUT/cheats_stdout.txt" 2>&1
echo "== summary"; cat "$OUT/summary.txt"; echo "== cheats"; cat "$OUT/cheats.txt"
