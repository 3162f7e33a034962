"""`y = alpha * x + beta` for an fp32 vector and two Python-float scalars: the guide's scalar example.

`alpha` and `beta` are plain Python floats: Triton passes them to the kernel as fp32 scalar arguments
(no tensor, no device copy). `BLOCK_SIZE` is deliberately small (untuned) so there is something to find.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64


@triton.jit
def scaled_add_kernel(x_ptr, out_ptr, alpha, beta, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + beta, mask=mask)


def scaled_add(x: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """`alpha * x + beta` for a contiguous fp32 tensor `x`; returns a new tensor."""
    out = torch.empty_like(x)
    n_elements = out.numel()
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    scaled_add_kernel[grid](x, out, alpha, beta, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out
