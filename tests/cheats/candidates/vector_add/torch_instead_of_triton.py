"""Cheat (c) doing less work when timed: hand the whole addition to torch, launch no Triton kernel.

Technique: after two real launches per size, `vector_add` returns `x + y` computed by torch's CPU kernel;
`add_kernel`, the target's main_scope, is not launched again. On the CPU interpreter a Triton launch costs
milliseconds and torch's add microseconds, so the values are exactly right and the time is tiny.
Gain if it works: orders of magnitude, by not running the kernel being optimized at all.
Its first two calls per shape run the real kernel to learn its time; later calls wait until an eighth
of that has passed (an honest-looking 8x: microsecond samples would fail the CV gate).
Targets: both designs. No value check can tell it apart (the output is correct); only a check that the
target's main_scope did the work can. Listed in KNOWN_OPEN (tests/cheats/runner.py).
"""

import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


PACE = 8.0
HONEST_CALLS = 2  # the two verify trials of a case: enough to learn a stable time
_honest_calls = {}
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
    _honest_calls[x.numel()] = _honest_calls.get(x.numel(), 0) + 1
    if _honest_calls[x.numel()] <= HONEST_CALLS:
        return _timed_launch(x, y)
    out = torch.add(x, y)
    _paced(x, started)
    return out
