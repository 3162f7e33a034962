"""GPU cheat (c) doing less work when timed: nothing is launched while a CUDA graph is being captured.

Technique: the kit times short calls by capturing them into a CUDA graph; `torch.cuda.is_current_stream_capturing()`
tells the candidate when that happens, and it then captures a kernel over the first 1/8 of the elements only.
Verify is never captured, so it sees the whole answer.
Gain if it works: short cases timed with CUDA graphs do an eighth of their work.
Targets: timing in the candidate's process. The judge records outside any capture and replays the record.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64


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
    out = torch.empty_like(x)
    n = out.numel()
    if torch.cuda.is_current_stream_capturing():
        n = max(n // 8, 1)
    _launch(x, y, out, n)
    return out
