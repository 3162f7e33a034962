#!/usr/bin/env bash
# Recorded runs for `tlx-agent simulate` (~9 min): the three examples' runs (the tuner on matmul and softmax,
# replayed vector_add with profiling), then `tlx-agent simulate` on each recorded run: the decisions must be
# reproduced exactly from the records. The runs' records are kept for docs/data.
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
tlx doctor > "$OUT/doctor.json" 2> "$OUT/doctor.txt" || true
cat "$OUT/doctor.txt"
RUN_LIMIT=160 run_opt matmul_tune matmul --provider tune --max-rounds 12 --candidates-per-round 1 --no-profile \
  --max-total-seconds 150
RUN_LIMIT=130 run_opt softmax_tune softmax --provider tune --max-rounds 12 --candidates-per-round 1 --no-profile \
  --max-total-seconds 120
RUN_LIMIT=200 run_opt va_replay vector_add --provider replay --replay-dir examples/vector_add/candidates \
  --max-rounds 2 --max-total-seconds 190
for name in matmul_tune softmax_tune va_replay; do
  tlx simulate "$OUT/$name" > "$OUT/$name.simulate.json" 2> "$OUT/$name.simulate.txt"
  echo "$name simulate exit=$? $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('all_match', d.get('all_match'), 'rows', len(d.get('rows', d.get('experiments', []))))" "$OUT/$name.simulate.json" 2>&1)" \
    | tee -a "$OUT/summary.txt"
done
cd "$OUT" && tar czf records.tgz --exclude='*/workers' --exclude='*/profile_artifacts' --exclude='*/bundle' \
  --exclude='*/validation' --exclude='*.py' --exclude='*.patch' --exclude='*.log' \
  matmul_tune softmax_tune va_replay 2>/dev/null || true
tar czf logs.tgz ./*.log ./*.simulate.* 2>/dev/null || true
rm -rf "$OUT/matmul_tune" "$OUT/softmax_tune" "$OUT/va_replay" ./*.log ./*.simulate.*
ls -la "$OUT"
cat "$OUT/summary.txt"
