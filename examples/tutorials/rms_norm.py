"""RMS norm forward in the Liger-kernel style: a helper picks the block size and the warp count from the
row length with an if-chain; the wrapper unpacks them."""

import torch
import triton
import triton.language as tl


def calculate_settings(n):
    BLOCK_SIZE = triton.next_power_of_2(n)
    if BLOCK_SIZE > 65536:
        raise RuntimeError(f"row of {n} elements exceeds the maximum block size")
    num_warps = 4
    if BLOCK_SIZE >= 32768:
        num_warps = 32
    elif BLOCK_SIZE >= 8192:
        num_warps = 16
    elif BLOCK_SIZE >= 2048:
        num_warps = 8
    return BLOCK_SIZE, num_warps


@triton.jit
def _rms_norm_fwd(Y, Y_row_stride, X, X_row_stride, W, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    X_row = tl.load(X + row_idx * X_row_stride + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask=mask, other=0)
    mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
    rstd = tl.rsqrt(mean_square + eps)
    Y_row = X_row * rstd * W_row
    tl.store(Y + row_idx * Y_row_stride + col_offsets, Y_row, mask=mask)


def rms_norm(x, weight, eps=1e-6):
    shape = x.shape
    x = x.view(-1, shape[-1])
    n_rows, n_cols = x.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    y = torch.empty_like(x)
    _rms_norm_fwd[(n_rows,)](y, y.stride(0), x, x.stride(0), weight, n_cols, eps,
                             BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return y.view(*shape)
