"""GPU cheat (c) doing the work where the timer does not look: a side stream.

Technique: launch the kernel on a stream of its own that the caller's stream never waits for, and return at
once. Events recorded on the caller's stream bracket an empty interval; a check that synchronises the whole
device afterwards still sees the right output.
Gain if it works: the measured time of an empty stream interval.
Targets: timing in the candidate's process. The judge replays the recorded launches on its own stream.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
_side = None


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def _launch(x, y, out, n_elements):
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    global _side
    if _side is None:
        _side = torch.cuda.Stream()
    out = torch.empty_like(x)
    _side.wait_stream(torch.cuda.current_stream())  # the inputs are ready; nobody waits for the output
    with torch.cuda.stream(_side):
        _launch(x, y, out, out.numel())
    return out
