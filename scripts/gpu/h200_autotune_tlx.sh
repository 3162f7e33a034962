#!/usr/bin/env bash
# A kernel that autotunes itself on the H200 (docs/autotune.md): fbtriton's TLX tutorial hopper_gemm_ws.py
# (`@triton.autotune` over 288 configurations, pruned to 96 per shape, use_cuda_graph=True), taken from
# tests/providers/tune_discovery/fixtures/tlx/ (MIT, copied from the fbtriton 3.7.4 wheel).
#
# Needs fbtriton under /tmp/fbvenv/bin/python: its wheel cut in parts here, sent one per command to /tmp/fb/, then
# scripts/gpu/install_fbtriton.sh on the host (the project's own wheels as for every GPU script, .whl).
#   bash scripts/gpu/h200_autotune_tlx.sh validate   init-bundle, then `validate` at default flags (timed; it must
#                                                     end within 5 minutes, PASSED or with a named refusal), its
#                                                     autotune lines, the longest silence in its log, torch beside
#   bash scripts/gpu/h200_autotune_tlx.sh optimize   `optimize --provider tune --max-total-seconds $TOTAL` (600),
#                                                     then the autotune choice per case, first-call latency of the
#                                                     untouched kernel and of the winner, and torch, all printed
#   bash scripts/gpu/h200_autotune_tlx.sh start      the same optimize in the background (a device command may
#   bash scripts/gpu/h200_autotune_tlx.sh collect    last 10 minutes; the run's own budget plus the autotune step
#                                                     and the preflight can pass that): `collect` waits up to
#                                                     WAIT seconds (540) for it, then prints as `optimize` does
# Another kernel: FIXTURE=examples/tlx_gemm/kernel.py BUNDLE=examples/tlx_gemm/h200 (its own bundle, not init-bundle's;
# NAME, default the file's name, is its folder under $OUT). Other shapes with init-bundle's harness: CASES=FILE, e.g.
# CASES=scripts/gpu/hopper_gemm_ws_aligned_cases.json NAME=hopper_gemm_ws_aligned (shapes whose count of M tiles is
# even: the tutorial's NUM_CTAS=2 configurations are wrong on the last M tile otherwise, docs/tlx.md).
# Everything goes under $OUT (default /tmp/autotune-tlx, kept while the host stays up); summary.txt is the record.
# A dry run of the plumbing on a CPU: PY=.venv/bin/python FIXTURE=examples/autotuned_add/kernel.py ENTRY=vector_add
# KIND=elementwise DTYPE=float32 BACKEND=cpu TOTAL=120 bash scripts/gpu/h200_autotune_tlx.sh validate (no torch line).
set -uo pipefail
part=${1:-validate}
export OUT=${OUT:-/tmp/autotune-tlx}
source "$(dirname "$0")/common.sh"
set +e  # every step reports what it got; one failing does not hide the others
PY=${PY:-/tmp/fbvenv/bin/python}
TOTAL=${TOTAL:-600}
FIXTURE=${FIXTURE:-tests/providers/tune_discovery/fixtures/tlx/hopper_gemm_ws.py}
ENTRY=${ENTRY:-matmul} KIND=${KIND:-gemm} DTYPE=${DTYPE:-float16} BACKEND=${BACKEND:-cuda}
NAME=${NAME:-$(basename "$FIXTURE" .py)}
WORK=$OUT/$NAME
export PY TOTAL FIXTURE ENTRY KIND DTYPE BACKEND NAME BUNDLE CASES  # `start` runs this script again in a session of its own
mkdir -p "$WORK"

stamped() {  # stamped FILE: stdin to FILE, each line prefixed with the seconds since the command started
  "$PY" -u -c 'import sys, time
t = time.monotonic()
for line in sys.stdin:
    print(f"{time.monotonic() - t:8.1f} {line}", end="", flush=True)' > "$1"
}

silence() {  # silence FILE: the longest gap between stamped lines, overall and in the autotune step (promised: 15 s)
  "$PY" - "$1" <<'PY'
import sys
lines = [(float(line.split(None, 1)[0]), line) for line in open(sys.argv[1]) if line.strip()]
def longest(selected):
    times = [t for t, _ in selected]
    return max((b - a for a, b in zip(times, times[1:])), default=0.0)
start = next((i for i, (_, line) in enumerate(lines) if "autotune status=starting" in line), None)
end = next((i for i, (_, line) in enumerate(lines) if "autotune status=done" in line or "autotune step failed" in line),
           len(lines) - 1)
step = lines[start:end + 1] if start is not None else []
print(f"log lines={len(lines)} longest_silence_s={longest(lines):.1f} "
      f"autotune_step_lines={len(step)} autotune_step_longest_silence_s={longest(step):.1f}")
PY
}

bundle() {  # the tutorial kernel and its init-bundle bundle (gemm, fp16, H200), or the bundle in BUNDLE
  [ -f "$WORK/bundle/harness.py" ] && return 0
  cp "$FIXTURE" "$WORK/kernel.py"
  if [ -n "${BUNDLE:-}" ]; then
    mkdir -p "$WORK/bundle" && cp "$BUNDLE"/harness.py "$BUNDLE"/cases.json "$BUNDLE"/target.json "$WORK/bundle/"
    echo "bundle: $BUNDLE" | tee -a "$OUT/summary.txt"; return 0
  fi
  local arch=(); [ "$BACKEND" = cuda ] && arch=(--arch h200)
  "$PY" -m orchestrator.cli init-bundle --kernel "$WORK/kernel.py" --entry "$ENTRY" --kind "$KIND" --dtype "$DTYPE" \
    --backend "$BACKEND" "${arch[@]}" --out "$WORK/bundle" > "$WORK/init.json" 2> "$WORK/init.log" \
    || { echo "init-bundle failed"; tail -5 "$WORK/init.log"; }
  [ -n "${CASES:-}" ] && cp "$CASES" "$WORK/bundle/cases.json"  # init-bundle's harness, other shapes
  echo "init-bundle: $(cat "$WORK/bundle/cases.json" | tr -d '\n' | cut -c1-300)" | tee -a "$OUT/summary.txt"
}

torch_beside() {  # torch.matmul on every case: its first call in a fresh process, and its median (CUDA events)
  [ "$KIND" = gemm ] && [ "$BACKEND" = cuda ] || return 0
  "$PY" - "$WORK/bundle/cases.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, subprocess, sys
first_call = r'''
import sys, time, torch
m, n, k = map(int, sys.argv[1:4])
a = torch.randn(m, k, device="cuda", dtype=torch.float16); b = torch.randn(k, n, device="cuda", dtype=torch.float16)
torch.cuda.synchronize(); t = time.perf_counter(); torch.matmul(a, b); torch.cuda.synchronize()
first = time.perf_counter() - t
for _ in range(20): torch.matmul(a, b)
times = []
for _ in range(100):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); torch.matmul(a, b); e.record(); e.synchronize(); times.append(s.elapsed_time(e) * 1000)
times.sort()
print(f"{first:.3f} {times[len(times) // 2]:.1f}")
'''
for case in json.load(open(sys.argv[1])):
    p = case["parameters"]
    out = subprocess.run([sys.executable, "-c", first_call, str(p["m"]), str(p["n"]), str(p["k"])],
                         capture_output=True, text=True)
    first, median = (out.stdout.split() + ["?", "?"])[:2]
    print(f"torch {case['case_id']}: first call in a fresh process {first} s, median {median} us"
          + (f" ({out.stderr.strip()[-200:]})" if out.returncode else ""))
PY
}

report() {  # report RESULT_JSON: the autotune choice per case, first calls before and after, the outcome
  "$PY" - "$1" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    r = json.load(open(r["result_json"])) if "result_json" in r else r
except Exception as exc:
    print("no result:", exc); sys.exit(0)
if "report" not in r:
    print("ERROR", r.get("error")); sys.exit(0)
rep = r["report"]
print(f"exit={r['exit_code']} stopping={r['stopping_reason']} winner={r['winner_experiment_id']} "
      f"aggregate={rep['aggregate_speedup']} wall_s={r['wall_seconds']:.0f}")
print(f"  detail: {r.get('stopping_detail', '')[:300]}")
for c in rep["workload"]:
    print(f"  {c['case_id']:<24} base={c['baseline_median_us']} final={c['final_median_us']} speedup={c['speedup']}")
auto = rep.get("autotune") or {}
for choice in auto.get("choices", []):
    config = " ".join(f"{k}={v}" for k, v in {**choice["config"].get("kwargs", {}),
                      **{k: v for k, v in choice["config"].items() if k != "kwargs" and v is not None}}.items())
    print(f"  autotune {choice['kernel']} cases={','.join(choice['case_ids'])} key={choice['key_values']} -> {config} "
          f"({choice['measured_ms']} ms, {choice['configs_tried']}/{choice['configs_listed']} tried, "
          f"{choice['seconds']:.0f} s)")
for which in ("untouched_first_call", "winner_first_call"):
    first = auto.get(which)
    unmeasured = auto.get(f"{which}_unmeasured") or "none"  # e.g. longer than its measurement's limit
    print(f"  {which}: " + (f"{first['seconds']:.2f} s (load {first['import_seconds']:.2f} s, call "
                            f"{first['call_seconds']:.2f} s, autotuned {first['autotuned']})" if first else unmeasured))
for e in r["experiments"]:
    d = e.get("decision") or {}
    print(f"  {e['experiment_id']:<10} {d.get('status')} {d.get('reason', '')[:160]}")
    # each worker: its wall, the kernel groups it started with, and its phases (docs/performance.md)
    for ev in e.get("evaluations", []):
        w = ev.get("worker") or {}
        phases = " ".join(f"{k}={v:.1f}" for k, v in (w.get("phases") or {}).items() if v >= 0.05)
        print(f"      {ev['label']:<10} wall={w.get('wall_seconds', 0):.1f} given={w.get('kernel_groups_given', 0)} "
              f"kept={w.get('kernel_groups_kept', 0)} {phases}")
print(f"  workers={rep.get('workers')} kernel_groups={rep.get('kernel_groups')} "
      f"worker_seconds={ {k: round(v, 1) for k, v in (rep.get('worker_seconds') or {}).items()} }")
PY
}

optimize_command() {  # the run's result to optimize.json, its stamped log to optimize.log
  "$PY" -m orchestrator.cli optimize --kernel "$WORK/kernel.py" --harness "$WORK/bundle/harness.py" \
    --cases "$WORK/bundle/cases.json" --target "$WORK/bundle/target.json" --output-dir "$WORK/optimize" \
    --provider tune --max-total-seconds "$TOTAL" --no-commit-winner 2>&1 > "$WORK/optimize.json" \
    | stamped "$WORK/optimize.log"
}

case "$part" in
  validate)
    [ "$BACKEND" = cuda ] && gpu_facts | tee -a "$OUT/summary.txt"
    bundle
    t0=$(date +%s)
    timeout 330 "$PY" -m orchestrator.cli validate --kernel "$WORK/kernel.py" --harness "$WORK/bundle/harness.py" \
      --cases "$WORK/bundle/cases.json" --target "$WORK/bundle/target.json" --output-dir "$WORK/validate" \
      2>&1 > "$WORK/validate.json" | stamped "$WORK/validate.log"
    echo "validate wall_s=$(( $(date +%s) - t0 )) (at most 300 wanted)" | tee -a "$OUT/summary.txt"
    silence "$WORK/validate.log" | tee -a "$OUT/summary.txt"
    grep -E "autotune (status|choice)|first_call|check=.*status=(failed|passed)|result=" "$WORK/validate.log" \
      | cut -c1-400 | tee -a "$OUT/summary.txt"
    grep -E "progress='configuration" "$WORK/validate.log" | sed -n '1p;$p' | cut -c1-300 | tee -a "$OUT/summary.txt"
    torch_beside
    ;;
  optimize)
    bundle
    optimize_command
    silence "$WORK/optimize.log" | tee -a "$OUT/summary.txt"
    report "$WORK/optimize.json"
    torch_beside
    ;;
  start)
    bundle
    rm -f "$WORK/optimize.done"
    # Its own process session: the host ends every process a command leaves behind except those (setsid).
    setsid bash "$0" background < /dev/null > /dev/null 2>&1 &
    echo "optimize started in the background: $WORK/optimize.log"
    ;;
  background)
    optimize_command
    echo done > "$WORK/optimize.done"
    ;;
  collect)
    for _ in $(seq 1 "${WAIT:-540}"); do [ -f "$WORK/optimize.done" ] && break; sleep 1; done
    [ -f "$WORK/optimize.done" ] || { echo "optimize still running:"; tail -3 "$WORK/optimize.log"; exit 0; }
    silence "$WORK/optimize.log" | tee -a "$OUT/summary.txt"
    report "$WORK/optimize.json"
    torch_beside
    ;;
esac
