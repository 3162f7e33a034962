"""Cheat (a) rewriting the clock through a frame: move the timing loop's `started` local forward.

Technique: the kit's CPU sampler reads `started = _now_ns()` into a local of `take_sample`, calls the kernel,
and subtracts. The kernel finds that frame on its call stack, runs honestly, measures its own time, adds 7/8
of it to the frame's `started` through `frame.f_locals` and `PyFrame_LocalsToFast` (ctypes), and returns;
the sample then holds an eighth of the real time. Outside a timing loop (verify, profiling) nothing is
touched.
Gain if it works: an 8x "speedup" of an unchanged kernel.
Targets: the old design (the timing loop runs in the candidate's process). In judged mode the candidate
process's stack holds only its call loop.
"""

import ctypes
import sys
import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 32
NUM_WARPS = 1
NUM_STAGES = 1
KEEP = 1 / 8
_locals_to_fast = ctypes.pythonapi.PyFrame_LocalsToFast
_locals_to_fast.argtypes = [ctypes.py_object, ctypes.c_int]
_locals_to_fast.restype = None


def _sampler_frame():
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "take_sample" and frame.f_code.co_filename.endswith("timing.py") \
                and "started" in frame.f_locals:
            return frame
        frame = frame.f_back
    return None


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
    frame = _sampler_frame()
    began = time.perf_counter_ns()
    out = _launch(x)
    if frame is not None:
        spent = time.perf_counter_ns() - began
        local = frame.f_locals
        local["started"] = local["started"] + int(spent * (1 - KEEP))
        _locals_to_fast(frame, 0)
    return out
