"""Row-wise softmax, one row per program, the whole row in one block of BLOCK_SIZE lanes.

Written in the Triton tutorial's style: the module asks the active driver for the device and its properties
at import, which compile ahead answers without a GPU.
"""

import triton
import triton.language as tl
from triton.runtime import driver

DEVICE = driver.active.get_active_torch_device()
PROPERTIES = driver.active.utils.get_device_properties(DEVICE.index)
SIZE_SMEM = PROPERTIES["max_shared_mem"]
TARGET = driver.active.get_current_target()


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_cols
    x = tl.load(in_ptr + row * in_row_stride + offsets, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + offsets, y, mask=mask)
