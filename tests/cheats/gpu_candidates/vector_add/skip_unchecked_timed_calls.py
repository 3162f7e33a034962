"""GPU cheat (c) doing the work only on calls likely to be checked: verify and every eighth timed call.

Technique: a call counter in a wrapper buffer. The first calls of a worker (verify, then the warm-up) are honest;
afterwards seven calls in eight return at once and leave the output buffer as it is. A judge that checks only the
last timed call of a benchmark, on an input set it keeps replaying, finds a correct answer in that buffer most of
the time, and the median of the samples is the time of an empty launch.
Gain if it works: several x on the median (most timed calls are empty).
Targets: checks of the last timed call only, outputs kept between calls. Every call now has a fresh input set and
poisoned outputs, and each is checked with probability 1/2, drawn after it ran.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
_counters = {}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, counter_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    calls = tl.load(counter_ptr)
    if (calls < 300) | (calls % 8 == 0):
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
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, _counters[n], n, BLOCK_SIZE=BLOCK_SIZE)
    count_call[(1,)](_counters[n])
    return out
