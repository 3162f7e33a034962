#!/usr/bin/env bash
# What compiling a round's candidates ahead side by side (`--overlap-compile-ahead`, run/ahead_step.py) saves, and
# whether it moves a measurement: the same 60 softmax grid configurations (scripts/grid_candidates.py, from the
# kernel at 1024 / 2 warps / 2 stages) replayed twice at BUDGET seconds each (default 200), first with the overlap,
# then without; scripts/gate_cost.py's table for both, then per candidate decided in both runs its aggregate
# speedup with over without (a host compile that slowed one side of an A/B/A would move these off 1).
#   bash scripts/gpu/h200_overlap_compile_ahead.sh        (everything under $OUT, summary.txt last)
source "$(dirname "$0")/common.sh"
set +e
BUDGET="${BUDGET:-200}"
gpu_facts | tee -a "$OUT/summary.txt"
softmax_grid 60
for mode in overlap no-overlap; do
  KERNEL=/tmp/softmax-start.py RUN_LIMIT=$((BUDGET + 25)) run_opt "$mode" softmax --provider replay \
    --replay-dir /tmp/softmax-grid --max-total-seconds "$BUDGET" --max-rounds 1000 "--$mode-compile-ahead" \
    > /dev/null
  grep -c "compile_ahead overlapped" "$OUT/$mode.log" | sed "s/^/$mode overlapped_turns=/" | tee -a "$OUT/summary.txt"
done
python3 scripts/gate_cost.py "$OUT/overlap" "$OUT/no-overlap" | tee -a "$OUT/summary.txt"
python3 - "$OUT/overlap/result.json" "$OUT/no-overlap/result.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, statistics, sys
runs = [{e["experiment_id"]: e for e in json.load(open(path))["experiments"]} for path in sys.argv[1:]]
ratios = []
for experiment_id, on in runs[0].items():
    off = runs[1].get(experiment_id)
    if off and on.get("aggregate_speedup") and off.get("aggregate_speedup") and on["metadata"] == off["metadata"]:
        ratios.append(on["aggregate_speedup"] / off["aggregate_speedup"])
if ratios:
    print(f"paired candidates={len(ratios)} median speedup ratio overlap/no-overlap={statistics.median(ratios):.4f} "
          f"min={min(ratios):.4f} max={max(ratios):.4f}")
for n, name in ((0, "overlap"), (1, "no-overlap")):
    gated = [e for e in runs[n].values() if e["experiment_id"] not in ("baseline", "final") and e["evaluations"]]
    print(f"{name}: decided={len(gated)} median wall={statistics.median(e['wall_seconds'] for e in gated):.2f} s")
PY
for mode in overlap no-overlap; do
  gzip -c "$OUT/$mode/result.json" > "$OUT/$mode-result.json.gz" 2>/dev/null
  gzip -c "$OUT/$mode.log" > "$OUT/$mode.log.gz" 2>/dev/null
  rm -rf "${OUT:?}/$mode" "$OUT/$mode.log"
done
