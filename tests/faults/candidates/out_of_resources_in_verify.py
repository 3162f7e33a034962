"""Fault: its first launch raises what Triton raises on a GPU for a configuration over the device's shared
memory (the compile happens on the first launch, inside verify): a build failure, not a wrong answer."""

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

BLOCK_SIZE = 64


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x, y):
    raise OutOfResources(294912, 232448, "shared memory")
