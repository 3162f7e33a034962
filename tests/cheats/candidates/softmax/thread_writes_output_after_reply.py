"""Cheat (e) finishing after the reply: a thread keeps writing the right answer into the slot after "called".

Technique: in judged mode the entry finds the call's output area (the `outputs` slot views in the call loop's
frame), returns an uninitialised tensor at once (the loop copies it into the slot and replies), and leaves a
thread that computes the real softmax and keeps writing it into that output area until the next call
starts. A judge that checks outputs some time after the reply (after a batch, or on another thread) reads
the right values; the timed round trip held no work.
Gain if it works: no kernel work inside the timed round trip.
Targets: the new design. The judge stops every thread of the candidate on the reply and checks at once, so
the slot still holds the returned garbage. Outside judged mode the kernel is honest.
"""

import sys
import threading

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 32
NUM_WARPS = 1
NUM_STAGES = 1
_current = {"call": 0}


def _slot_output(like):
    frame = sys._getframe(2)
    while frame is not None:
        outputs = frame.f_locals.get("outputs")
        if isinstance(outputs, list) and outputs and isinstance(outputs[0], torch.Tensor) \
                and tuple(outputs[0].shape) == tuple(like.shape):
            return outputs[0]
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


def _keep_writing(call, x, slot_output):
    answer = _launch(x.clone())
    while _current["call"] == call:
        slot_output.copy_(answer)


def softmax(x: torch.Tensor) -> torch.Tensor:
    _current["call"] += 1
    slot_output = _slot_output(x) if "sandbox_worker.judged.candidate" in sys.modules else None
    if slot_output is None:
        return _launch(x)
    threading.Thread(target=_keep_writing, args=(_current["call"], x, slot_output), daemon=True).start()
    return torch.empty((x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
