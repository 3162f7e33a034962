"""examples/softmax/kernel.py under `@triton.autotune` (the comparison in docs/tuner.md).

`@triton.autotune` over exactly the configurations that `scripts/tuner_study.py` measures one by one:
`GRID` (a list of knob dicts) is written in by the study before the source is built; the launch passes no
knob, so Triton's autotuner benchmarks every configuration on the first call of each key and keeps the
fastest. This is the comparison a user would make: the same knobs, tuned by Triton itself.
"""

import torch
import triton
import triton.language as tl

GRID: list[dict[str, int]] = []  # written in by scripts/tuner_study.py --autotune


def _config(values: dict[str, int]) -> triton.Config:
    return triton.Config({"BLOCK_SIZE": values["BLOCK_SIZE"]}, num_warps=values["NUM_WARPS"],
                         num_stages=values["NUM_STAGES"])


@triton.autotune(configs=[_config(values) for values in GRID], key=["n_cols"])
@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    columns = tl.arange(0, BLOCK_SIZE)

    # Pass 1, per lane: the running max of the lane's columns and the sum of exp(x - that max),
    # rescaled when the max grows. Masked columns load -inf; a lane that has seen only those keeps
    # max -inf and sum 0 (its exp offset is 0 instead of -inf, so no -inf - -inf = NaN appears).
    lane_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    lane_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + columns
        x = tl.load(x_row + offsets, mask=offsets < n_cols, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(lane_max, x)
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)
        lane_sum = lane_sum * tl.exp(lane_max - shift) + tl.exp(x - shift)
        lane_max = new_max
    # Combine the lanes: the row max, and every lane's sum rescaled to it.
    row_max = tl.max(lane_max, axis=0)
    row_sum = tl.sum(lane_sum * tl.exp(lane_max - row_max), axis=0)

    # Pass 2: normalise and write.
    inverse_sum = 1.0 / row_sum
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + columns
        mask = offsets < n_cols
        x = tl.load(x_row + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(out_row + offsets, tl.exp(x - row_max) * inverse_sum, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D fp32 tensor (rows may be strided, columns contiguous)."""
    if x.dim() != 2:
        raise ValueError(f"softmax expects a 2-D tensor, got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0))
    return out
