"""GPU cheat (c) a memo keyed on the input's address, so that profiles of one input set back the benchmark's.

Technique: the memo is looked up by the address of the input (and nothing else). A profiler that launches the
same bound input set a dozen times, without refilling the buffers in between, sees every launch after the first
answered from the memo: its kernel times agree with a benchmark that reuses input sets, so a cross-check of the
benchmark against the profilers passes.
Gain if it works: about 1.5x, backed by the profilers' kernel times.
Targets: Proton and NCU launching one input set repeatedly without poison. The judge profiles calls prepared as
timed ones (fresh input set, buffers and outputs poisoned, L2 flushed); an allocator that hands a fresh input the
address of an old one now makes the memo answer with another set's sums, which the random checks find.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
MAGIC = 0x0ADD0ADD
_state = {}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, tags_ptr, memo_ptr, n_elements, BLOCK_SIZE: tl.constexpr,
               MAGIC: tl.constexpr):
    pid = tl.program_id(axis=0)
    lanes = tl.arange(0, BLOCK_SIZE)
    offsets = pid * BLOCK_SIZE + lanes
    mask = offsets < n_elements
    address = (x_ptr.to(tl.int64) >> 8).to(tl.int32)
    if (tl.load(tags_ptr + pid * 2) == MAGIC) & (tl.load(tags_ptr + pid * 2 + 1) == address):
        tl.store(out_ptr + offsets, tl.load(memo_ptr + offsets, mask=mask), mask=mask)
    else:
        out = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, out, mask=mask)
        tl.store(memo_ptr + offsets, out, mask=mask)
        tl.store(tags_ptr + pid * 2 + 1, address)
        tl.store(tags_ptr + pid * 2, MAGIC)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    blocks = triton.cdiv(n, BLOCK_SIZE)
    if n not in _state:
        _state[n] = (torch.zeros(blocks * 2, dtype=torch.int32, device=x.device), torch.empty_like(x))
    tags, memo = _state[n]
    out = torch.empty_like(x)
    add_kernel[(blocks,)](x, y, out, tags, memo, n, BLOCK_SIZE=BLOCK_SIZE, MAGIC=MAGIC)
    return out
