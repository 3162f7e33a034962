"""A kernel whose parameters exercise Triton's launch typing: annotations, a do_not_specialize list, a default."""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["n_steady"])
def typed_kernel(x_ptr, y_ptr, n, n_steady, big, scale, flag, count: tl.int64, nothing, ACT: tl.constexpr,
                 BLOCK: tl.constexpr = 128):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    if ACT == "relu":
        x = tl.maximum(x, 0.0)
    if flag:
        x = x * scale
    tl.store(y_ptr + offsets, x + (count + n_steady + big).to(tl.float32), mask=mask)
