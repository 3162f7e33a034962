"""No knob at all: each program copies one row of a fixed head dimension (an unmasked `tl.arange(0, D)`,
so D must equal the row length) and the launch passes no num_warps."""

import torch
import triton
import triton.language as tl


@triton.jit
def head_copy_kernel(src_ptr, dst_ptr, D: tl.constexpr):
    row = tl.program_id(0)
    offsets = row * D + tl.arange(0, D)
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets))


def head_copy(x):
    out = torch.empty_like(x)
    head_copy_kernel[(x.shape[0],)](x, out, D=x.shape[1])
    return out
