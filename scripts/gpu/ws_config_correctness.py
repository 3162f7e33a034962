"""Which configurations of fbtriton's hopper_gemm_ws.py autotune list compute the right product on one shape.

The kernel's own autotune times configurations and never checks their results; where its choice is wrong on a
shape, `validate` reports the untouched kernel failing verify there. This script launches each configuration the
kernel's own pruning keeps for the shape (with its launch options: num_warps, ctas_per_cga) and compares the
result with torch.matmul in float32, one line per configuration.

    python scripts/gpu/ws_config_correctness.py M N K [SECONDS]   (needs fbtriton: /tmp/fbvenv/bin/python)
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

FIXTURE = Path(__file__).resolve().parents[2] / "tests/providers/tune_discovery/fixtures/tlx/hopper_gemm_ws.py"


def load_fixture():
    spec = importlib.util.spec_from_file_location("hopper_gemm_ws", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    m, n, k = map(int, sys.argv[1:4])
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 150.0
    ws = load_fixture()
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    expected = a.float() @ b.float()
    triton.set_allocator(ws.alloc_fn)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    configs = ws.preprocess_configs(ws.get_autotune_configs(), {"M": m, "N": n, "K": k})
    print(f"shape m={m} n={n} k={k}: {len(configs)} configurations after the kernel's own pruning", flush=True)
    started, wrong = time.monotonic(), 0
    for index, config in enumerate(configs):
        if time.monotonic() - started > seconds:
            print(f"stopped after {index} configurations ({seconds:g} s)")
            break
        c = torch.empty(m, n, device="cuda", dtype=torch.float16)
        nargs = {"a_desc": TensorDescriptor(a, a.shape, a.stride(), [1, 1]),
                 "b_desc": TensorDescriptor(b, b.shape, b.stride(), [1, 1]),
                 "c_desc": TensorDescriptor(c, c.shape, c.stride(), [1, 1]), **config.kwargs}
        config.pre_hook(nargs)
        grid = (min(sms, triton.cdiv(m, config.kwargs["BM"]) * triton.cdiv(n, config.kwargs["BN"])),)
        try:
            ws.matmul_kernel_tlx_ws.fn[grid](nargs["a_desc"], nargs["b_desc"], nargs["c_desc"], m, n, k,
                                              NUM_SMS=sms, num_warps=config.num_warps, num_stages=config.num_stages,
                                              ctas_per_cga=config.ctas_per_cga, **config.kwargs)
            torch.cuda.synchronize()
        except Exception as exc:  # a configuration that does not fit (shared memory) is not run, and said so
            print(f"  {index:3d} not run: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            continue
        bad = ~torch.isclose(c.float(), expected, rtol=1e-2, atol=1e-1)
        count = int(bad.sum())
        rows = torch.nonzero(bad.any(dim=1)).flatten()
        wrong += count > 0
        where = f" rows {int(rows[0])}..{int(rows[-1])} ({len(rows)})" if count else ""
        print(f"  {index:3d} {'WRONG' if count else 'ok   '} {count:8d} elements{where}  "
              + " ".join(f"{key}={value}" for key, value in config.kwargs.items())
              + f" ctas_per_cga={config.ctas_per_cga}", flush=True)
    print(f"wrong: {wrong} of the configurations run")


if __name__ == "__main__":
    main()
