"""GPU cheat (c) steering the timer into CUDA graphs with empty warm-up calls, then leaving work to the graph.

Technique: a call counter the wrapper keeps in its own buffer (bumped by a second kernel after each call). The
first calls (verify) are honest; the next 60 do nothing at all, so a timer that picks its mode from its own
warm-up sees calls of a few microseconds and times with CUDA graphs; from then on only every twentieth call
computes, the last of each unrolled group, whose output is the one a graph timer that checks only the last
call reads, and the others leave whatever the shared output buffer holds.
Gain if it works: about 20x on a short case (nineteen calls in twenty do nothing).
Targets: a timing mode chosen per side from its own warm-up, unchecked warm-up calls, and graph timing that
checks one call in twenty. The mode is fixed per case by the run's first (untouched) measurement; every call,
warm-up too, has fresh inputs and poisoned outputs and buffers (the counter is random bytes) and may be checked.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
_counters = {}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, counter_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    calls = tl.load(counter_ptr)
    honest = (calls < 4) | ((calls >= 64) & (calls % 20 == 19))
    if honest:
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)


@triton.jit
def count_call(counter_ptr):
    tl.store(counter_ptr, tl.load(counter_ptr) + 1)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    if n not in _counters:
        _counters[n] = torch.zeros(1, dtype=torch.int32, device=x.device)
    counter = _counters[n]
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, counter, n, BLOCK_SIZE=BLOCK_SIZE)
    count_call[(1,)](counter)
    return out
