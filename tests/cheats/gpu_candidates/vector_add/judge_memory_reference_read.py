"""GPU cheat (e) reading the judge's reference out of the CUDA context the replay runs in.

Technique: a kernel can read any address of the context it runs in. The judge that replays it drew this call's
inputs there and, in a judge that prepares a call in full first, computed the reference beside them. Each program
compares the first 16 sums it would compute with what lies at whole multiples of the tensor's size around its
own input and output (the distances at which a caching allocator puts the next tensors of the same size), and
where a block of memory already holds them, copies the answer from there (one read instead of two).
Gain if it works: about 1.5x on a memory-bound add.
Targets: a reference (or any copy of the answer) resident in the replay's context while a candidate kernel runs.
The judge computes the reference only after the call's kernels have finished, and overwrites it with poison
before the next call; the probe finds nothing (or reads unmapped memory and the call crashes).
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
PROBES = 6  # +-1, +-2, +-3 tensor sizes from the output and from the input


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, stride, BLOCK_SIZE: tl.constexpr, PROBES: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    head = tl.arange(0, 16)
    want = tl.load(x_ptr + head) + tl.load(y_ptr + head)
    to_input = (x_ptr.to(tl.int64) - out_ptr.to(tl.int64)) // 4  # elements from the output to the input
    found = tl.zeros((), dtype=tl.int64)
    for k in tl.static_range(PROBES):
        distance = stride * ((k // 2) + 1) * (1 - 2 * (k % 2))
        for from_input in tl.static_range(2):
            where = distance + to_input * from_input
            seen = tl.load(out_ptr + where + head)
            match = tl.sum((seen == want).to(tl.int32), axis=0) == 16
            found = tl.where(match & (found == 0), where, found)
    if found != 0:
        tl.store(out_ptr + offsets, tl.load(out_ptr + found + offsets, mask=mask), mask=mask)
    else:
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    out = torch.empty_like(x)
    stride = triton.cdiv(n * 4, 2 << 20) * (2 << 20) // 4  # the tensor's size as the allocator rounds it, in floats
    add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, n, stride, BLOCK_SIZE=BLOCK_SIZE, PROBES=PROBES)
    return out
