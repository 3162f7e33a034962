"""GPU cheat (c) cheap when profiled, honest when timed: telling the two apart by the gap between launches.

Technique: each launch reads the GPU's global timer and keeps it in a wrapper buffer. Profilers call a kernel
with long pauses between launches (a synchronize and a scope per call; ncu's replay passes), a benchmark loop
calls it back to back: when the last launch was more than 2 ms ago the kernel does nothing, so its profiled kernel
time is tiny. Profiles that are only evidence, and a profile step that may fail without consequence, let a
candidate choose what its profiles say (here: that it is much faster than it is, or, as easily, slower).
Gain if it works: profiles that back any benchmark claim, or that are missing when they would veto.
Targets: profile evidence that need not exist or agree with the benchmark. A required profile that disagrees
with the benchmark blocks the promotion; and in the judge the kept timestamp is unpredictable poison, so the
kernel skips at random while timed, and the random checks find its NaN outputs.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
GAP_NS = 2_000_000
_kept = {}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, last_ptr, n_elements, BLOCK_SIZE: tl.constexpr, GAP_NS: tl.constexpr):
    now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
    last = tl.load(last_ptr)
    if (now - last < GAP_NS) | (last == 0):
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)


@triton.jit
def stamp(last_ptr):
    now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
    tl.store(last_ptr, now)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    if n not in _kept:
        _kept[n] = torch.zeros(1, dtype=torch.int64, device=x.device)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, _kept[n], n, BLOCK_SIZE=BLOCK_SIZE, GAP_NS=GAP_NS)
    stamp[(1,)](_kept[n])
    return out
