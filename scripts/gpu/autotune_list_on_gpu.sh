#!/usr/bin/env bash
# A kernel with a 32-configuration `@triton.autotune` list on one GPU, plain Triton (no fbtriton needed):
#   1. what compiling the list on threads saves before its first timing (scripts/gpu/autotune_compile_threads.py)
#   2. `validate` at default flags on it (the trusted autotune step compiles the list ahead on threads, then times it;
#      the untouched kernel's first call is measured in a fresh worker of its own)
#   3. `optimize --provider tune --max-total-seconds $TOTAL` (180) on it
# The kernel is the one autotune_compile_threads.py times (Triton's tutorial matmul over 4 tiles x 2 BLOCK_K x 2 warps
# x 2 stages) with an entry `matmul(a, b)`; its bundle comes from init-bundle (gemm, fp16). Everything goes under $OUT;
# summary.txt is the record.   Usage on the device host: OUT=... bash scripts/gpu/autotune_list_on_gpu.sh
set -uo pipefail
export OUT=${OUT:-/tmp/autotune-list}
source "$(dirname "$0")/common.sh"
set +e
mkdir -p "$OUT/kernel"
python3 - "$OUT/kernel/matmul32.py" <<'PY'
import sys
sys.path.insert(0, "scripts/gpu")
from autotune_compile_threads import KERNEL
entry = '''

def matmul(a, b):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, "incompatible dimensions"
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c
'''
open(sys.argv[1], "w").write(KERNEL + entry)
PY
gpu_facts | tee -a "$OUT/summary.txt"
timeout 200 python3 scripts/gpu/autotune_compile_threads.py --threads 8 2>&1 | tee -a "$OUT/summary.txt"
export PY=python3 FIXTURE=$OUT/kernel/matmul32.py ENTRY=matmul KIND=gemm DTYPE=float16 NAME=matmul32 TOTAL=${TOTAL:-180}
bash scripts/gpu/h200_autotune_tlx.sh validate
bash scripts/gpu/h200_autotune_tlx.sh optimize
