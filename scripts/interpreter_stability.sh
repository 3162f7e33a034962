#!/usr/bin/env bash
# How stable are CPU-interpreter timings on this machine? ROUNDS (default 3) rounds of `tlx-agent validate` on
# the three CPU example bundles, the three validates of a round running side by side (a parallel load on 2 cores), at
# default settings, no flags (the lock records every figure; on the interpreter they are reported, not judged);
# prints whether each validate passed, each case's worst within-worker CV and the spread of the three workers'
# medians.   Usage: [ROUNDS=10] scripts/interpreter_stability.sh [OUT_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${1:-$(mktemp -d -t tlx-interp-stability.XXXXXX)}"
mkdir -p "$out"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for ex in vector_add softmax matmul; do
    .venv/bin/tlx-agent validate --kernel "examples/$ex/kernel.py" --harness "examples/$ex/harness.py" \
      --cases "examples/$ex/cases.json" --target "examples/$ex/target.json" \
      --output-dir "$out/$ex-$round" > "$out/$ex-$round.json" 2>/dev/null &
  done
  wait
done
.venv/bin/python - "$out" <<'PY'
import json, pathlib, sys
paths = sorted(pathlib.Path(sys.argv[1]).glob("*-[0-9]*.json"), key=lambda p: (p.stem.rsplit("-", 1)[0],
                                                                         int(p.stem.rsplit("-", 1)[1])))
passed = 0
for path in paths:
    try:
        lock = json.loads(path.read_text())
    except ValueError:
        print(f"{path.stem:<14} no lock (validate did not finish)")
        continue
    passed += bool(lock.get("passed"))
    failed = [c["name"] for c in lock.get("checks", []) if c["status"] == "failed"]
    rows = ", ".join(f"{r['case_id']} cv {r['max_cv']:.3f} spread {r['median_spread']:.3f}" for r in lock["stability"])
    print(f"{path.stem:<14} passed={lock.get('passed')} {'failed: ' + ','.join(failed) + ' ' if failed else ''}{rows}")
print(f"{passed} of {len(paths)} validate runs passed")
PY
