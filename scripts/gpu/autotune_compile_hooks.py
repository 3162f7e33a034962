"""Compiling ahead a list whose configurations set tensor-descriptor blocks in a pre_hook (one GPU, plain Triton).

TLX and Hopper TMA GEMMs launch with host tensor descriptors whose block shape each configuration's `pre_hook`
sets to its tile (fbtriton's hopper_gemm_ws.py does). The compile specializes on that block, so a list compiled
ahead without running the hooks holds kernels the timings never look up, and every timing compiles again. Each mode
runs in a fresh process with a fresh TRITON_CACHE_DIR:
  hooks     sandbox_worker.autotune_compile.compile_ahead with the call's arguments by name (each hook run first)
  no_hooks  the same without them (what the trusted step did before)
then the kernel's autotuned first call, and prints: kernels compiled ahead, kernels the first call compiled on top,
the seconds of each.   Usage on the device host: python3 scripts/gpu/autotune_compile_hooks.py [--threads 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KERNEL = textwrap.dedent('''
    import itertools
    import triton
    import triton.language as tl

    def set_blocks(nargs):
        nargs["a_desc"].block_shape = [nargs["BM"], nargs["BK"]]
        nargs["b_desc"].block_shape = [nargs["BK"], nargs["BN"]]
        nargs["c_desc"].block_shape = [nargs["BM"], nargs["BN"]]

    CONFIGS = [triton.Config({"BM": m, "BN": n, "BK": k}, num_warps=w, num_stages=3, pre_hook=set_blocks)
               for (m, n), k, w in itertools.product([(128, 128), (128, 256), (64, 128), (128, 64)], [32, 64], [4, 8])]

    @triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
    @triton.jit
    def matmul_tma(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = a_desc.load([pid_m * BM, k * BK])
            b = b_desc.load([k * BK, pid_n * BN])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))
''')

RUN = textwrap.dedent('''
    import json, sys, time
    import torch, triton
    from triton.tools.tensor_descriptor import TensorDescriptor
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, sys.argv[4])
    import tuned
    from sandbox_worker.autotune_compile import compile_ahead

    def cached(fn):  # kernels the function holds, on every device (what a timing looks up)
        return sum(len(cache[0]) for cache in fn.device_caches.values())
    mode, threads, size = sys.argv[2], int(sys.argv[3]), 4096
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    c = torch.empty(size, size, device="cuda", dtype=torch.float16)
    descs = [TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1]) for t in (a, b, c)]
    args = (*descs, size, size, size)
    grid = lambda meta: (triton.cdiv(size, meta["BM"]), triton.cdiv(size, meta["BN"]))
    nargs = dict(zip(tuned.matmul_tma.arg_names, args))
    fn = tuned.matmul_tma.fn
    torch.cuda.synchronize()
    seconds, compiled = compile_ahead(fn, tuned.CONFIGS, args, {"grid": grid, "warmup": False}, threads,
                                      nargs if mode == "hooks" else None)
    before = cached(fn)
    started = time.perf_counter()
    tuned.matmul_tma[grid](*args)
    torch.cuda.synchronize()
    first = time.perf_counter() - started
    ok = torch.allclose(c.float(), (a.float() @ b.float()), atol=1.0, rtol=0.05)
    print(json.dumps({"mode": mode, "configs": len(tuned.CONFIGS), "ahead_s": seconds, "compiled_ahead": compiled,
                      "first_call_s": first, "compiled_by_first_call": cached(fn) - before,
                      "correct": bool(ok), "best": str(tuned.matmul_tma.best_config)}))
''')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=8)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "tuned.py"), "w", encoding="utf-8") as handle:
            handle.write(KERNEL)
        for mode in ("no_hooks", "hooks"):
            env = {**os.environ, "TRITON_CACHE_DIR": tempfile.mkdtemp(dir=folder)}
            done = subprocess.run([sys.executable, "-c", RUN, folder, mode, str(options.threads), ROOT], env=env,
                                  capture_output=True, text=True, timeout=150)
            line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
            if done.returncode != 0 or not line:
                print(f"{mode}: failed rc={done.returncode} {done.stderr.strip()[-800:]}")
                continue
            r = json.loads(line)
            print(f"{mode:<8} configs={r['configs']} compiled_ahead={r['compiled_ahead']} in {r['ahead_s']:.1f}s; "
                  f"first call {r['first_call_s']:.1f}s compiled {r['compiled_by_first_call']} more; "
                  f"correct={r['correct']} best={r['best']}")


if __name__ == "__main__":
    main()
