"""Cheat (e) signalling the judge: SIGSTOP the judge for the length of every call, SIGCONT before replying.

Technique: in judged mode the entry stops its parent (the judge) first thing, runs the kernel, and resumes
the judge before returning. A judge that measures a call with anything that only advances while the judge
runs (its own CPU time, a sampling thread, an event loop's ticks) measures nothing while it is stopped; a
judge that watches the candidate between calls cannot watch while stopped either.
Gain if it works: the timed round trip measures next to nothing.
Targets: the new design. The judge times with a monotonic wall clock, which keeps counting while it is
stopped, and stops the candidate outside its calls; ideally kill() toward the judge is refused. Outside
judged mode the kernel is honest and sends no signal.
"""

import os
import signal
import sys

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 32
NUM_WARPS = 1
NUM_STAGES = 1


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


def softmax(x: torch.Tensor) -> torch.Tensor:
    if "sandbox_worker.judged.candidate" not in sys.modules:
        return _launch(x)
    judge = os.getppid()
    os.kill(judge, signal.SIGSTOP)
    try:
        return _launch(x)
    finally:
        os.kill(judge, signal.SIGCONT)
