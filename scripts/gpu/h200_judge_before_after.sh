#!/usr/bin/env bash
# The examples' honest replay candidates at their default H200 targets (verdicts in the judge), side by side in
# one script: this checkout ("after") and an export of an earlier commit in BEFORE (default .before, e.g.
# `git archive <commit> protocol orchestrator sandbox_worker examples scripts | tar -x -C .before`). Per example,
# after then before, each a full optimize run; the table says each decision, speedup and the worker walls.
#   Usage on the device host: [BEFORE=.before] [EXAMPLES="vector_add matmul softmax"] bash scripts/gpu/h200_judge_before_after.sh
source "$(dirname "$0")/common.sh"
before=$(cd "${BEFORE:-.before}" && pwd)
gpu_facts | tee "$OUT/gpu.txt"
for example in ${EXAMPLES:-vector_add matmul softmax}; do
  RUN_LIMIT=${RUN_LIMIT:-270} run_opt "${example}_after" "$example" --provider replay \
    --replay-dir "examples/$example/candidates" --max-rounds 3
  (cd "$before" && PYTHONPATH="/tmp/site:$before" OUT="$OUT" RUN_LIMIT=${RUN_LIMIT:-270} bash -c "
    source scripts/gpu/common.sh >/dev/null
    run_opt ${example}_before $example --provider replay --replay-dir examples/$example/candidates --max-rounds 3")
done
python3 - "$OUT" ${EXAMPLES:-vector_add matmul softmax} <<'PY' | tee "$OUT/before_after.txt"
import json, sys
from pathlib import Path
out, examples = Path(sys.argv[1]), sys.argv[2:]
print(f"{'example':<11} {'side':<7} {'exit':>4} {'winner':<10} {'aggregate':>9} {'decisions':<48} worker walls (s)")
for example in examples:
    for side in ("after", "before"):
        try:
            r = json.loads((out / f"{example}_{side}.json").read_text())
            r = json.loads(Path(r["result_json"]).read_text()) if "result_json" in r else r
        except Exception as exc:  # noqa: BLE001
            print(f"{example:<11} {side:<7} no result ({exc})"); continue
        if "report" not in r:
            print(f"{example:<11} {side:<7} ERROR {str(r.get('error'))[:200]}"); continue
        decisions = " ".join(f"{e['experiment_id']}:{(e.get('decision') or {}).get('status')}"
                             f"({(e.get('aggregate_speedup') or 0):.4f})" for e in r["experiments"][1:])
        walls = [ev["worker"]["wall_seconds"] for e in r["experiments"] for ev in e["evaluations"]]
        print(f"{example:<11} {side:<7} {r['exit_code']:>4} {r['winner_experiment_id']:<10} "
              f"{r['report']['aggregate_speedup'] or 0:>9.4f} {decisions:<48} sum={sum(walls):.1f} "
              f"median={sorted(walls)[len(walls) // 2]:.1f} n={len(walls)}")
        steps = r["report"].get("verify_seconds")  # where verify went, by step (sides that record it)
        if steps:
            print(f"{'':<19} verify steps (s): " + " ".join(f"{k}={v:.1f}" for k, v in steps.items()))
PY
