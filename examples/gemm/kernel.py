"""Tiled fp32 matrix multiplication `c = a @ b`: the guide's GEMM example.

Each program computes one `BLOCK_M x BLOCK_N` tile of `c`, walking K in steps of `BLOCK_K` with an
fp32 accumulator. `tl.dot` is asked for `input_precision="ieee"`: on a GPU the default for fp32 inputs
is TF32 (10-bit mantissa), whose error is far outside an fp32 tolerance; the interpreter computes in
fp32 either way, so the kernel means the same thing on both. Loads and stores are masked, so any M, N
and K work (ragged edges included); offsets are int32, so each operand must hold fewer than 2**31
elements.

The launch configuration is deliberately untuned (16x16x16 tiles, one warp): the module-level
constants are the knobs a tuner edits. Tiles must stay >= 16 for `tl.dot`.
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 16
BLOCK_N = 16
BLOCK_K = 16
NUM_WARPS = 1


@triton.jit
def gemm_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    mask_m = offs_m[:, None] < M
    mask_n = offs_n[None, :] < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=mask_m & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=mask_m & mask_n)


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`a @ b` for 2-D fp32 tensors `a` [M, K] and `b` [K, N]; returns a new fp32 [M, N] tensor."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"gemm expects [M, K] @ [K, N], got {tuple(a.shape)} @ {tuple(b.shape)}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    gemm_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS,
    )
    return c
