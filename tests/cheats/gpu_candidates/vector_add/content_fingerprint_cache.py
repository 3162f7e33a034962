"""GPU cheat (c) memoizing on a content fingerprint of the inputs.

Technique: fingerprint each input by a few sampled elements; when a call's fingerprint was seen before, hand
back the stored output without launching. Fresh inputs per call defeat it only if every call's inputs
really differ in the sampled elements.
Gain if it works: repeated timed calls cost a lookup (1.95x on the H200 before the judge).
Targets: the candidate's own calls. The judge replays launches on fresh inputs and never calls the
candidate inside the timed window.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
_cache = {}


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


def _fingerprint(t):
    n = t.numel()
    picks = torch.tensor([0, n // 3, n // 2, n - 1], device=t.device)
    return (n, tuple(t.reshape(-1)[picks].tolist()))


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    key = (_fingerprint(x), _fingerprint(y))
    hit = _cache.get(key)
    if hit is not None:
        return hit.clone()
    out = torch.empty_like(x)
    _launch(x, y, out, out.numel())
    _cache[key] = out
    return out
