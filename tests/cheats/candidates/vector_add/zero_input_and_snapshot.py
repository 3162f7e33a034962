"""Cheat (b) rewriting the judge: zero an input and the kit's snapshot of it, then return the other input.

Technique: the last-output re-check computes its expected output from a snapshot of the inputs taken when
the benchmark starts and checks the live inputs against that snapshot. Whenever the kernel sees new input
tensors (the first call of a benchmark is an untimed warm-up call) it walks `gc` for the
`last_output_check` closures; when it finds one it zeroes `y` in place and the snapshot's copy of `y`, so
the reference becomes x + 0 and "the inputs are unchanged" still holds. Timed calls on those inputs then
return a copy of x, no launch. Verify is computed honestly.
Gain if it works: a memcpy instead of n/64 interpreted programs per timed call.
Its fast path waits until an eighth of an honest call has passed (an honest-looking 8x; skipping all
the work would give microsecond samples whose spread the CV gate rejects).
Targets: the old design. In judged mode the judge's private copies of the inputs are in the judge's memory.
"""

import gc
import time
import types

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
_seen = set()
_zeroed = set()


def _zero_y_everywhere(y):
    """Zero `y` and every live last-output snapshot of a tensor equal to it; True when one was found."""
    found = False
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__qualname__ == "last_output_check.<locals>.check":
            cells = dict(zip(obj.__code__.co_freevars, obj.__closure__ or (), strict=True))
            snapshot = cells["snapshot"].cell_contents if "snapshot" in cells else ()
            if len(snapshot) == 2 and isinstance(snapshot[1], torch.Tensor) and snapshot[1].shape == y.shape \
                    and torch.equal(snapshot[1], y):
                snapshot[1].zero_()
                found = True
    if found:
        y.zero_()
    return found


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
    key = (id(x), id(y), x.data_ptr(), y.data_ptr())
    if key not in _seen:
        _seen.add(key)
        if _zero_y_everywhere(y):
            _zeroed.add(key)
    if key in _zeroed:
        out = x.clone()
        _paced(x, started)
        return out
    return _timed_launch(x, y)
