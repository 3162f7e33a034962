"""GPU cheat (c) a cross-call memo kept in the wrapper's own buffers, keyed on the input's content.

Technique: the wrapper hands the kernel two tensors it allocated once and keeps (a tag table and a memo). Each
program looks up its block by the bits of its first input element: on a hit it copies the memo to the output
(one read and one write instead of two reads and one write); on a miss it computes, and stores the answer and
the tag. A judge that binds these buffers once per input set and replays the same few input sets finds the memo
filled after the first round.
Gain if it works: about 1.5x on a memory-bound add (8 bytes per element moved instead of 12).
Targets: a replay that keeps wrapper buffers between calls and reuses input sets. The judge refills every wrapper
buffer with unpredictable bytes before every call and draws a fresh input set for it, so no tag is ever found.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
SLOTS = 4
MAGIC = 0x5EED1E55
_state = {}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, tags_ptr, memo_ptr, n_elements, BLOCK_SIZE: tl.constexpr,
               SLOTS: tl.constexpr, MAGIC: tl.constexpr):
    pid = tl.program_id(axis=0)
    lanes = tl.arange(0, BLOCK_SIZE)
    offsets = pid * BLOCK_SIZE + lanes
    mask = offsets < n_elements
    key = tl.load(x_ptr + pid * BLOCK_SIZE).to(tl.int32, bitcast=True)
    row = pid * SLOTS + (key & (SLOTS - 1))
    tag = tl.load(tags_ptr + row * 2)
    seen = tl.load(tags_ptr + row * 2 + 1)
    if (tag == MAGIC) & (seen == key):
        tl.store(out_ptr + offsets, tl.load(memo_ptr + row * BLOCK_SIZE + lanes, mask=mask), mask=mask)
    else:
        out = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, out, mask=mask)
        tl.store(memo_ptr + row * BLOCK_SIZE + lanes, out, mask=mask)
        tl.store(tags_ptr + row * 2 + 1, key)
        tl.store(tags_ptr + row * 2, MAGIC)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    blocks = triton.cdiv(n, BLOCK_SIZE)
    if n not in _state:  # allocated once, in the untimed first call; kept by the wrapper ever after
        _state[n] = (torch.zeros(blocks * SLOTS * 2, dtype=torch.int32, device=x.device),
                     torch.empty(blocks * SLOTS * BLOCK_SIZE, dtype=x.dtype, device=x.device))
    tags, memo = _state[n]
    out = torch.empty_like(x)
    add_kernel[(blocks,)](x, y, out, tags, memo, n, BLOCK_SIZE=BLOCK_SIZE, SLOTS=SLOTS, MAGIC=MAGIC)
    return out
