"""Cheat (e) scribbling on other slots: copy this call's input over the other slots' inputs, then memoize.

Technique: in judged mode the calls' tensors live in one shared memfd; the candidate finds it in
/proc/self/fd and /proc/self/maps (the mapping that holds the input) and the call loop's slot views in its
caller's frame. After computing a call honestly, it writes that call's input over the inputs of every other
slot and keeps the output under a fingerprint of the input. A judge that fills its slots once (per batch,
or per warm-up) and times later calls on what it believes are the inputs it wrote would hand the candidate
the same input again, and the cached output is returned without a launch.
Gain if it works: a copy of the output instead of every row of interpreted tiles per timed call.
Targets: the new design. The judge rewrites a slot's inputs before every call and compares them after, so the
scribbles are overwritten and the cache never hits.
"""

import os
import sys

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 32
NUM_WARPS = 1
NUM_STAGES = 1
_cache = {}


def _memfd_mappings():
    """(start, end) of every mapping of a memfd in this process, from /proc/self/fd and /proc/self/maps."""
    memfds = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("/memfd:"):
            memfds.add(target.split(" (deleted)")[0])
    mappings = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].strip().split(" (deleted)")[0] in memfds:
                start, end = (int(value, 16) for value in parts[0].split("-"))
                mappings.append((start, end))
    return mappings


def _other_slot_inputs(x):
    """The input views of every slot but the one `x` lives in, if `x` lies in a shared memfd."""
    address = x.data_ptr()
    if not any(start <= address < end for start, end in _memfd_mappings()):
        return []
    frame = sys._getframe(2)
    while frame is not None:
        views = getattr(frame.f_locals.get("self"), "slot_views", None)
        if isinstance(views, list):
            return [inputs[0] for inputs, _ in views
                    if inputs and inputs[0].shape == x.shape and inputs[0].data_ptr() != address]
        frame = frame.f_back
    return []


def _fingerprint(x):
    m, n = x.shape
    return (m, n, x[0, :8].numpy().tobytes(), x[-1, -8:].numpy().tobytes(), x[m // 2, n // 2].item())


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
    key = _fingerprint(x)
    if key in _cache:
        return _cache[key].clone()
    out = _launch(x)
    others = _other_slot_inputs(x)
    if others:
        for view in others:
            view.copy_(x)
        _cache.clear()
        _cache[key] = out.clone()
    return out
