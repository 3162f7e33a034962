"""GPU cheat (a) rewriting the clock: `torch.cuda.Event.elapsed_time` divided by 8.

Technique: at import, wrap `torch.cuda.Event.elapsed_time` so that every event pair reports an eighth of the
real time. The kit's event timer and its CUDA-graph timer both read their samples through it when they run
in the candidate's process. The kernel is the baseline (BLOCK_SIZE 64) and verifies on its merits.
Gain if it works: an 8x "speedup" of an unchanged kernel (8.07x on the H200 before the judge).
Targets: timing in the candidate's process. The judge times the replay in its own process, where this
module was never imported.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64

_real_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _real_elapsed(self, end) / 8.0


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
    _launch(x, y, out, out.numel())
    return out
