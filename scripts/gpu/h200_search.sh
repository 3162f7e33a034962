#!/usr/bin/env bash
# The tuner's search on the H200: worker start-to-ready (fork server vs fresh), and the tuner with screening and the
# joint search on the example h200/ bundles and on tutorial-style kernels (bundles from init-bundle).
#   bash scripts/gpu/h200_search.sh a|b|c     (one part per device call, each under 10 minutes)
#     a: start-to-ready (median of 20 each) and the softmax example tuned for 200 s
#     b: the matmul example tuned for 250 s and the tutorial layer norm for 170 s
#     c: the tutorial softmax and matmul, 170 s each
#   bash scripts/gpu/h200_search.sh one FILE ENTRY KIND SECONDS   one tutorial kernel tuned for SECONDS
# Runs write under /tmp/search; $OUT gets summary.txt and one tarball of results, logs and screening records.
part=${1:-a}
final_out=${OUT:-}
export OUT=/tmp/search
source "$(dirname "$0")/common.sh"
gpu_facts | tee -a "$OUT/summary.txt"
tutorial() {  # tutorial FILE ENTRY KIND [SECONDS]: init-bundle for the H200, then tune (170 s unless given)
  local file=$1 entry=$2 kind=$3 seconds=${4:-170} dir="$OUT/bundle-$1" t0
  tlx init-bundle --kernel "examples/tutorials/$file.py" --entry "$entry" --kind "$kind" --backend cuda \
    --arch h200 --out "$dir" > "$OUT/init-$file.json" 2>&1 || { echo "init-bundle $file failed"; tail -5 "$OUT/init-$file.json"; }
  cp "examples/tutorials/$file.py" "$dir/kernel.py"
  t0=$(date +%s)
  timeout $((seconds + 15)) python3 -m orchestrator.cli optimize --kernel "$dir/kernel.py" --harness "$dir/harness.py" \
    --cases "$dir/cases.json" --target "$dir/target.json" --output-dir "$OUT/tutorial-$file" --provider tune \
    --max-total-seconds "$seconds" --worker-start forkserver --no-commit-winner \
    > "$OUT/tutorial-$file.json" 2> "$OUT/tutorial-$file.log" || true
  echo "tutorial-$file wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/summary.txt"
  summary "tutorial-$file" "$OUT/tutorial-$file.json"
  grep -E "screening|no tunable|worker start" "$OUT/tutorial-$file.log" | cut -c1-220 | head -6 | tee -a "$OUT/summary.txt" || true
}
case "$part" in
  a)
    python3 scripts/bench_search.py ready --bundle examples/vector_add --target examples/vector_add/h200/target.json \
      --count 20 > "$OUT/ready.log" 2>&1 || true
    tail -8 "$OUT/ready.log" | tee -a "$OUT/summary.txt"
    RUN_LIMIT=215 run_opt softmax-tune softmax --provider tune --max-total-seconds 200 --worker-start forkserver
    ;;
  b)
    RUN_LIMIT=265 run_opt matmul-tune matmul --provider tune --max-total-seconds 250 --worker-start forkserver
    tutorial layer_norm layer_norm norm
    ;;
  c)
    tutorial softmax softmax rowwise
    tutorial matmul matmul gemm
    ;;
  one)
    tutorial "$2" "$3" "$4" "$5"
    ;;
esac
python3 scripts/bench_search.py runs "$OUT"/*-tune "$OUT"/tutorial-* 2>/dev/null | grep -v "no result" | tee -a "$OUT/summary.txt" || true
if [ -n "$final_out" ]; then
  cp "$OUT/summary.txt" "$final_out/summary-$part.txt"
  (cd "$OUT" && tar czf "$final_out/search-$part.tgz" --exclude='*/workers/*' --exclude='*/bundle/*' \
     --exclude='*.py' --exclude='*/profile_artifacts/*' . ) || true
fi
