"""A user's `out = alpha * x + y` over the first n elements, with a Python float and a Python int."""

import torch
import triton
import triton.language as tl


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float, n: int) -> torch.Tensor:
    out = torch.empty_like(x)
    scaled_add_kernel[(triton.cdiv(n, 256),)](x, y, out, alpha, n, BLOCK=256)
    return out
