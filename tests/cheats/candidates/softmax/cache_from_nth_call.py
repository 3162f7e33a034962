"""Cheat (c) doing less work when timed: from the fourth call of a shape on, return the previous output again.

Technique: count calls per input shape. Verify makes two calls per case and a benchmark one untimed warm-up
call, all computed; from the fourth call of a shape on (the timed ones), the kernel returns a copy of the
last output it computed, whose input (the benchmark's, never changed) is the current one, so the
re-checked last output is right. No key on content, identity or address is needed.
Gain if it works: a copy of the output instead of every row of interpreted tiles in nearly every timed call.
Its fast path waits until an eighth of an honest call has passed (an honest-looking 8x; skipping all
the work would give microsecond samples whose spread the CV gate rejects).
Targets: the old design. In judged mode every call brings fresh inputs, so a repeated output is wrong.
"""

import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 32
NUM_WARPS = 1
NUM_STAGES = 1
COMPUTED_CALLS = 3
_calls = {}
_last = {}


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    columns = tl.arange(0, BLOCK_SIZE)
    lane_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    lane_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + columns
        x = tl.load(x_row + offsets, mask=offsets < n_cols, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(lane_max, x)
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)
        lane_sum = lane_sum * tl.exp(lane_max - shift) + tl.exp(x - shift)
        lane_max = new_max
    row_max = tl.max(lane_max, axis=0)
    row_sum = tl.sum(lane_sum * tl.exp(lane_max - row_max), axis=0)
    inverse_sum = 1.0 / row_sum
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + columns
        mask = offsets < n_cols
        x = tl.load(x_row + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(out_row + offsets, tl.exp(x - row_max) * inverse_sum, mask=mask)


def _launch(x, out=None):
    """The baseline launch (32-column tiles, one warp): one program per row."""
    if x.dim() != 2:
        raise ValueError(f"softmax expects a 2-D tensor, got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](
        x, out, n_cols, x.stride(0), out.stride(0),
        BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    return out


PACE = 8.0
_honest_seconds = {}


def _paced(x, started):
    """Busy-wait until an eighth of an honest call on this shape has passed since `started`: the skipped
    work then looks like a plausible 8x kernel with an honest spread, which the CV gate accepts."""
    target = _honest_seconds.get(tuple(x.shape))
    if target is not None:
        deadline = started + target / PACE
        while time.perf_counter() < deadline:
            pass


def _timed_launch(x):
    started = time.perf_counter()
    out = _launch(x)
    seconds = time.perf_counter() - started
    shape = tuple(x.shape)
    _honest_seconds[shape] = min(seconds, _honest_seconds.get(shape, seconds))
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    started = time.perf_counter()
    shape = tuple(x.shape)
    _calls[shape] = _calls.get(shape, 0) + 1
    if _calls[shape] > COMPUTED_CALLS and shape in _last:
        out = _last[shape].clone()
        _paced(x, started)
        return out
    out = _timed_launch(x)
    _last[shape] = out.clone()
    return out
