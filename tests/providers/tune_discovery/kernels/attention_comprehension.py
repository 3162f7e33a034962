"""Attention's forward pass in the fused-attention tutorial's style: the autotune configs are a comprehension
over lists of tile sizes, stages and warps, filtered by a `keep` function, and the grid reads BLOCK_M from the
chosen config. One value per list, so that the interpreter's autotuner has nothing to time; the stages come
from a module name that depends on the backend, as the tutorial's do."""

import torch
import triton
import triton.language as tl

STAGE_CHOICES = [1] if torch.version.hip else [2]

configs = [
    triton.Config({'BLOCK_M': BM, 'BLOCK_N': BN}, num_stages=s, num_warps=w) \
    for BM in [16]\
    for BN in [16]\
    for s in STAGE_CHOICES\
    for w in [1]\
]


def keep(conf):
    BLOCK_M = conf.kwargs["BLOCK_M"]
    BLOCK_N = conf.kwargs["BLOCK_N"]
    return not (BLOCK_M * BLOCK_N < 128 * 128 and conf.num_warps == 8)


@triton.autotune(list(filter(keep, configs)), key=["N_CTX", "HEAD_DIM"])
@triton.jit
def _attn_fwd(Q, K, V, Out, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < N_CTX, other=0.0)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + offs_n[None, :] * HEAD_DIM + offs_d[:, None], mask=offs_n[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k)
        v = tl.load(V + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_n[:, None] < N_CTX, other=0.0)
        acc += tl.dot(qk, v)
    tl.store(Out + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=offs_m[:, None] < N_CTX)


def attention(q, k, v):
    o = torch.empty_like(q)
    N_CTX, HEAD_DIM = q.shape
    grid = lambda args: (triton.cdiv(N_CTX, args["BLOCK_M"]), 1, 1)  # noqa: E731 - the tutorial's style
    _attn_fwd[grid](q, k, v, o, N_CTX, HEAD_DIM=HEAD_DIM)
    return o
