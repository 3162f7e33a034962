"""Cheat (c) doing less work when timed: return at once and let a thread finish, joined where nobody times.

Technique: `softmax` allocates the output, starts a thread that runs the real kernel into it, and returns the
still-empty tensor; the timer stops. Whoever reads the output later has to wait for the thread, and the
places that read it are all outside the timed window: the kit poisons the previous output (`fill_`) before
it starts the clock for the next call, and the comparisons read values through `detach`. Both
`torch.Tensor.fill_` and `torch.Tensor.detach` are wrapped to join the output's thread first. The switch
interval is lowered so that the returning thread gets the GIL back quickly.
Gain if it works: a thread start instead of every row of interpreted tiles inside the timed window.
Targets: the old design. In judged mode the candidate process copies the returned tensor into the slot
(through `detach`) before it replies, so the join lands inside the timed round trip.
"""

import sys
import threading

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 32
NUM_WARPS = 1
NUM_STAGES = 1
_pending = {}
_real_fill = torch.Tensor.fill_
_real_detach = torch.Tensor.detach
sys.setswitchinterval(1e-4)


def _join(tensor):
    worker = _pending.pop(id(tensor), None)
    if worker is not None and worker is not threading.current_thread():
        worker.join()


def _fill_after_join(self, *args, **kwargs):
    _join(self)
    return _real_fill(self, *args, **kwargs)


def _detach_after_join(self, *args, **kwargs):
    _join(self)
    return _real_detach(self, *args, **kwargs)


torch.Tensor.fill_ = _fill_after_join
torch.Tensor.detach = _detach_after_join


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
    out = torch.empty((x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    worker = threading.Thread(target=_launch, args=(x, out))
    _pending[id(out)] = worker
    worker.start()
    return out
