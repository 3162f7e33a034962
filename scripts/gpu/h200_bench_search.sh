#!/usr/bin/env bash
# The tuner against the grid on the H200: the tuner's revalidated winner after --max-total-seconds 600 against the
# exhaustive grid of the same knobs and @triton.autotune over the same configurations, and worker
# start-to-ready. A 600 s run does not fit one device command (10 minutes with the install), so it runs in a
# session of its own (setsid: it outlives the command that started it while the machine stays held) and the
# next command, made at once, waits for it and then measures; nothing else uses the GPU meanwhile.
#   bash scripts/gpu/h200_bench_search.sh start EXAMPLE   start the tune run, then wait up to 560 s for it
#   bash scripts/gpu/h200_bench_search.sh finish EXAMPLE  wait for the run, then the grid + autotune study
#   bash scripts/gpu/h200_bench_search.sh more EXAMPLE [tuner_study options]
#        the next command after finish: the grid configurations finish did not walk, with finish's 5 best
#        measured again beside the tuned kernel (tuner_study --resume), when the grid outgrows one command
#   bash scripts/gpu/h200_bench_search.sh ready           start-to-ready, fork server vs fresh, median of 20
#   bash scripts/gpu/h200_bench_search.sh quick EXAMPLE SECONDS [tuner_study options]
#        one command: a tune run with --max-total-seconds SECONDS (less than 600, so it fits), then
#        its winner against the grid (or the part of it given by tuner_study options), without autotune
# Everything lands in /tmp/bench (kept while the machine is held); $OUT gets summary.txt and a tarball.
part=$1 example=${2:-}
final_out=${OUT:-}
export OUT=/tmp/bench
source "$(dirname "$0")/common.sh"
wait_for_run() {  # wait_for_run SECONDS: until the tune run's pid is gone
  local pid_file="$OUT/tune-$example.pid" waited=0
  [ -f "$pid_file" ] || { echo "no tune run of $example was started"; return 1; }
  while kill -0 "$(cat "$pid_file")" 2>/dev/null && [ "$waited" -lt "$1" ]; do sleep 5; waited=$((waited + 5)); done
  kill -0 "$(cat "$pid_file")" 2>/dev/null && { echo "tune-$example still running after ${waited}s"; return 1; }
  echo "tune-$example finished"
}
grid_options() {  # the comparison grid of EXAMPLE, for finish and more
  if [ "$example" = matmul ]; then
    # 180 launchable configurations on three cases: compiles ahead capped at 150 s, the walk at 280 s (on
    # 2026-12-02 150 compiles took 117.6 s, so finish covers part of the grid and `more` the rest); no autotune (over
    # 180 configurations it tunes each of the three shapes, ~470 s, as measured on the first case on 2026-12-01)
    echo --no-autotune --seconds 280 --compile-seconds 150 --compile-workers 14 --budget-seconds 0.1 \
      --skip-smem-over 227 --values tile=64,128,256 warps=4,8 stages=2,3,4 group=1,8
  else
    echo --seconds 150 --compile-workers 8 --budget-seconds 0.2
  fi
}
case "$part" in
  start)
    gpu_facts | tee -a "$OUT/summary.txt"
    # run_opt in a new session: the optimize command, its result, log and summary lines as everywhere else
    RUN_LIMIT=700 setsid bash -c 'source scripts/gpu/common.sh && run_opt "tune-$0" "$0" --provider tune \
      --max-total-seconds 600' "$example" < /dev/null > /dev/null 2>&1 &
    echo $! > "$OUT/tune-$example.pid"
    wait_for_run 560 || true
    ;;
  finish)
    wait_for_run 580
    python3 scripts/bench_search.py runs "$OUT/tune-$example" | tee -a "$OUT/summary.txt"
    # what each gated candidate cost, and the fork server's warm-up paid once for the run
    python3 scripts/gate_cost.py "$OUT/tune-$example" | tee -a "$OUT/summary.txt"
    grep -h "worker start: forked" "$OUT/tune-$example.log" | cut -c1-220 | tee -a "$OUT/summary.txt" || true
    python3 scripts/bench_search.py compare --example "$example" --run "$OUT/tune-$example" --out "$OUT" \
      $(grid_options) | tee -a "$OUT/summary.txt"
    ;;
  more)
    shift 2
    cp "$OUT/tuner_study_$example.json" "$OUT/tuner_study_$example.finish.json"
    python3 scripts/bench_search.py compare --example "$example" --run "$OUT/tune-$example" --out "$OUT" \
      $(grid_options) --resume "$OUT/tuner_study_$example.jsonl" "$@" | tee -a "$OUT/summary.txt"
    ;;
  quick)
    seconds=$3; shift 3
    gpu_facts | tee -a "$OUT/summary.txt"
    RUN_LIMIT=$((seconds + 60)) run_opt "tune-$example" "$example" --provider tune --max-total-seconds "$seconds"
    python3 scripts/bench_search.py runs "$OUT/tune-$example" | tee -a "$OUT/summary.txt"
    python3 scripts/bench_search.py compare --example "$example" --run "$OUT/tune-$example" --out "$OUT" \
      --no-autotune "$@" | tee -a "$OUT/summary.txt"
    ;;
  ready)
    python3 scripts/bench_search.py ready --bundle examples/vector_add --target examples/vector_add/h200/target.json \
      --count 20 2>&1 | tail -8 | tee -a "$OUT/summary.txt"
    ;;
esac
if [ -n "$final_out" ]; then
  cp "$OUT/summary.txt" "$final_out/summary-$part-$example.txt" 2>/dev/null || true
  (cd "$OUT" && tar czf "$final_out/bench-$part-$example.tgz" --exclude='*/workers/*' --exclude='*/bundle/*' \
     --exclude='*/profile_artifacts/*' --exclude='*.ncu-rep' . ) || true
fi
