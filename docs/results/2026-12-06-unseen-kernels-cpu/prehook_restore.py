import torch
import triton
import triton.language as tl


def _zero(nargs):
    nargs["out_ptr"].zero_()


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 64}, num_warps=1, pre_hook=_zero),
        triton.Config({"BLOCK_SIZE": 256}, num_warps=4, pre_hook=_zero),
    ],
    key=["n_elements"],
    restore_value=["acc_ptr"],
    warmup=5,
    rep=20,
)
@triton.jit
def axpy_kernel(x_ptr, acc_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    acc = tl.load(acc_ptr + offs, mask=mask)
    tl.store(acc_ptr + offs, acc + x, mask=mask)
    tl.store(out_ptr + offs, acc + 2 * x, mask=mask)


def axpy(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    acc = y.clone()
    out = torch.empty_like(x)
    n = x.numel()
    axpy_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, acc, out, n)
    return out
