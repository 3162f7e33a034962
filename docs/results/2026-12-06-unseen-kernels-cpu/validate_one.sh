#!/usr/bin/env bash
# init-bundle, then `validate` at default flags, for one kernel file of this folder on the CPU interpreter.
#   usage (from the project root): bash docs/results/2026-12-06-unseen-kernels-cpu/validate_one.sh NAME ENTRY KIND
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name=$1 entry=$2 kind=$3
out=${OUT:-/tmp/unseen-kernels}/$name
rm -rf "$out"; mkdir -p "$out"
.venv/bin/python -m orchestrator.cli init-bundle --kernel "$here/$name.py" --entry "$entry" --kind "$kind" \
  --out "$out/bundle" > "$out/init.json" 2> "$out/init.log" || { echo "$name: init-bundle failed"; tail -3 "$out/init.log"; exit 1; }
.venv/bin/python -m orchestrator.cli validate --kernel "$here/$name.py" --harness "$out/bundle/harness.py" \
  --cases "$out/bundle/cases.json" --target "$out/bundle/target.json" --output-dir "$out/validate" \
  > "$out/validate.json" 2> "$out/validate.log"
echo "$name: exit $?"
grep -E "result=|status=failed|autotune choice" "$out/validate.log" | cut -c1-220
