"""What compiling an autotune list on threads saves, before its configurations are timed (one GPU, plain Triton).

A matmul in the style of Triton's tutorial with a list of CONFIGS configurations (block sizes, warps, stages), key
M, N, K. Each mode runs in a fresh process with a fresh TRITON_CACHE_DIR (nothing compiled before):
  serial   the kernel's first call: Triton compiles and times each configuration in turn (what a worker pays today)
  threads  the list compiled on THREADS threads as the trusted step's guard does (sandbox_worker/autotune_compile.py,
           Triton's `AsyncCompileMode`), then the first call (every configuration compiled: it only times them)
and prints one line per mode: the precompile, the first call, their sum, and the configuration chosen.
  Usage on the device host: python3 scripts/gpu/autotune_compile_threads.py [--threads 8] [--size 4096]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # for sandbox_worker

KERNEL = textwrap.dedent('''
    import itertools
    import torch
    import triton
    import triton.language as tl

    CONFIGS = [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
                             num_warps=w, num_stages=s)
               for (m, n), k, w, s in itertools.product([(128, 128), (128, 256), (64, 128), (128, 64)], [32, 64],
                                                         [4, 8], [3, 4])]

    @triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                      stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                      GROUP_SIZE_M: tl.constexpr):
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m
        offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
        offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
        offs_k = tl.arange(0, BLOCK_SIZE_K)
        a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
            accumulator = tl.dot(a, b, accumulator)
            a_ptrs += BLOCK_SIZE_K * stride_ak
            b_ptrs += BLOCK_SIZE_K * stride_bk
        c = accumulator.to(tl.float16)
        offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))
''')

RUN = textwrap.dedent('''
    import json, sys, time
    import torch, triton
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, sys.argv[5])
    import tuned
    mode, threads, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    c = torch.empty(size, size, device="cuda", dtype=torch.float16)
    args = (a, b, c, size, size, size, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    grid = lambda meta: (triton.cdiv(size, meta["BLOCK_SIZE_M"]) * triton.cdiv(size, meta["BLOCK_SIZE_N"]),)
    torch.cuda.synchronize()
    started = time.perf_counter()
    if mode == "threads":  # what the trusted step's guard does before a key's first timing
        from sandbox_worker.autotune_compile import compile_ahead
        compile_ahead(tuned.matmul_kernel.fn, tuned.CONFIGS, args, {"grid": grid, "warmup": False}, threads)
    compiled = time.perf_counter()
    tuned.matmul_kernel[grid](*args)
    torch.cuda.synchronize()
    ended = time.perf_counter()
    best = tuned.matmul_kernel.best_config
    print(json.dumps({"mode": mode, "configs": len(tuned.CONFIGS), "precompile_s": compiled - started,
                      "first_call_s": ended - compiled, "total_s": ended - started, "best": str(best)}))
''')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--modes", default="serial,threads")
    options = parser.parse_args()
    import triton

    print(f"triton {triton.__version__}; threads {options.threads}; size {options.size}")
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "tuned.py"), "w", encoding="utf-8") as handle:
            handle.write(KERNEL)
        for mode in options.modes.split(","):
            env = {**os.environ, "TRITON_CACHE_DIR": tempfile.mkdtemp(dir=folder)}
            done = subprocess.run([sys.executable, "-c", RUN, folder, mode, str(options.threads), str(options.size), ROOT],
                                  env=env, capture_output=True, text=True, timeout=150)
            line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
            if done.returncode != 0 or not line:
                print(f"{mode}: failed rc={done.returncode} {done.stderr.strip()[-600:]}")
                continue
            result = json.loads(line)
            print(f"{mode:<8} configs={result['configs']} precompile={result['precompile_s']:.1f}s "
                  f"first_call={result['first_call_s']:.1f}s total={result['total_s']:.1f}s best={result['best']}")


if __name__ == "__main__":
    main()
