"""Cheat (c) doing less work when timed: memoize on object id plus version counter.

Technique: cache the last 8 outputs keyed on `(id(x), x._version, id(y), y._version)`. The verify trial that
refills the same tensors in place bumps their version counters, so it misses the cache and is computed; the
timed calls of a benchmark reuse one pair of tensors that nobody writes, so every call after the first is a
hit and returns a copy of the cached output (the harness poisons the copy, never the cache).
Gain if it works: a 16 KB copy instead of n/64 interpreted programs per timed call.
Its fast path waits until an eighth of an honest call has passed (an honest-looking 8x; skipping all
the work would give microsecond samples whose spread the CV gate rejects).
Targets: the old design. In judged mode every call gets fresh inputs written by the judge into slot views
whose version counters the judge's writes do not bump, so a hit serves a stale output.
"""

import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
CACHE_ENTRIES = 8
_cache = {}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


PACE = 8.0
_honest_seconds = {}


def _paced(x, started):
    """Busy-wait until an eighth of an honest call on this size has passed since `started`: the skipped
    work then looks like a plausible 8x kernel with an honest spread, which the CV gate accepts."""
    target = _honest_seconds.get(x.numel())
    if target is not None:
        deadline = started + target / PACE
        while time.perf_counter() < deadline:
            pass


def _timed_launch(x, y):
    started = time.perf_counter()
    out = torch.empty_like(x)
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    seconds = time.perf_counter() - started
    _honest_seconds[x.numel()] = min(seconds, _honest_seconds.get(x.numel(), seconds))
    return out


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    started = time.perf_counter()
    key = (id(x), x._version, x.data_ptr(), id(y), y._version, y.data_ptr(), x.numel())
    hit = _cache.get(key)
    if hit is not None:
        out = hit.clone()
        _paced(x, started)
        return out
    out = _timed_launch(x, y)
    if len(_cache) >= CACHE_ENTRIES:
        _cache.pop(next(iter(_cache)))
    _cache[key] = out.clone()
    return out
