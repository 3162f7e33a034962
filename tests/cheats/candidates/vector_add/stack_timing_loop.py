"""Cheat (c) doing less work when timed: find the timing loop on the call stack and memoize inside it.

Technique: every call walks `sys._getframe()` looking for the timing kit's sampling loop (`take_sample`,
`collect` or `warm_up` in `harness_kit/timing.py` or `sampling.py`). Outside it (verify, profiling) the
kernel is computed. Inside it the first call on a pair of inputs is computed and cached, and later calls
return a copy; the inputs of a benchmark never change, so the re-checked last output is right.
Gain if it works: a 16 KB copy instead of n/64 interpreted programs per timed call.
Its fast path waits until an eighth of an honest call has passed (an honest-looking 8x; skipping all
the work would give microsecond samples whose spread the CV gate rejects).
Targets: the old design. In judged mode the candidate process's stack holds only its own call loop, the
same for verify and timed calls.
"""

import sys
import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
TIMING_FRAMES = {"take_sample", "collect", "warm_up"}
_cache = {}


def _inside_timing_loop():
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in TIMING_FRAMES and code.co_filename.endswith(("timing.py", "sampling.py")):
            return True
        frame = frame.f_back
    return False


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
    if not _inside_timing_loop():
        return _timed_launch(x, y)
    key = (id(x), id(y), x.data_ptr(), y.data_ptr())
    if key not in _cache:
        _cache.clear()
        _cache[key] = _timed_launch(x, y).clone()
        return _cache[key].clone()
    out = _cache[key].clone()
    _paced(x, started)
    return out
