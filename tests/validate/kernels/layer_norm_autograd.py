"""A fused layer norm forward launched from a `torch.autograd.Function`, as the Triton tutorial writes it:
the entry is `layer_norm = LayerNorm.apply`, its parameters those of `forward` after `ctx`."""

import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_fwd(X, Y, W, B, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(W + cols, mask=mask)
    b = tl.load(B + cols, mask=mask)
    tl.store(Y + cols, centered * rstd * w + b, mask=mask)


class LayerNorm(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        y = torch.empty_like(x)
        x_arg = x.reshape(-1, x.shape[-1])
        M, N = x_arg.shape
        BLOCK_SIZE = triton.next_power_of_2(N)
        num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
        _layer_norm_fwd[(M,)](x_arg, y, weight, bias, x_arg.stride(0), N, eps, BLOCK_SIZE=BLOCK_SIZE,
                              num_warps=num_warps)
        ctx.save_for_backward(x, weight, bias)
        return y


layer_norm = LayerNorm.apply
