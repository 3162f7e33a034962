"""Element-wise vector addition with Proton scope markers, for `--diagnostic-instrumentation` on a GPU.

The same kernel as `examples/vector_add/kernel.py` plus `pl.enter_scope`/`pl.exit_scope` around its loads
and its store. The markers compile to nothing unless Proton's instrumentation backend is on, so benchmarks
are unaffected; with it on, a diagnostic-only worker records per-warp cycle traces of the two scopes.
Proton's language module needs a GPU build of Triton (not the CPU interpreter).
"""

import torch
import triton
import triton.language as tl
import triton.profiler.language as pl

pl.enable_semantic("triton")

BLOCK_SIZE = 64


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    pl.enter_scope("load")
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    pl.exit_scope("load")
    pl.enter_scope("store")
    tl.store(out_ptr + offsets, x + y, mask=mask)
    pl.exit_scope("store")


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = out.numel()
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out
