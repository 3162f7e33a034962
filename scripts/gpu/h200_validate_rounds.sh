#!/usr/bin/env bash
# `tlx-agent validate` at default settings on each example's h200/ bundle, ROUNDS times in turn
# (vector_add, softmax, matmul, then again), printing each case's within-worker CVs and worker spread.
#   Usage on the device host: ROUNDS=3 FIRST_ROUND=3 bash scripts/gpu/h200_validate_rounds.sh
source "$(dirname "$0")/common.sh"
gpu_facts | tee "$OUT/gpu.txt"
first="${FIRST_ROUND:-1}"
for round in $(seq "$first" $(( first + ${ROUNDS:-3} - 1 ))); do
  for ex in vector_add softmax matmul; do
    run_validate "$ex" "$round"
    rm -rf "$OUT/validate-$ex-$round" "$OUT/validate-$ex-$round.log"
  done
done
