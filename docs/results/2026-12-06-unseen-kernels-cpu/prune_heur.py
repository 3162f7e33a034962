import torch
import triton
import triton.language as tl


def _prune(configs, named_args, **kwargs):
    n = named_args["n_elements"]
    return [c for c in configs if c.kwargs["BLOCK_SIZE"] <= max(64, triton.next_power_of_2(n))]


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b in (64, 128, 256) for w in (1, 2)],
    key=["n_elements"],
    prune_configs_by={"early_config_prune": _prune},
)
@triton.heuristics({"EVEN": lambda args: args["n_elements"] % args["BLOCK_SIZE"] == 0})
@triton.jit
def scale_kernel(x_ptr, out_ptr, n_elements, alpha, BLOCK_SIZE: tl.constexpr, EVEN: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if EVEN:
        x = tl.load(x_ptr + offs)
        tl.store(out_ptr + offs, x * alpha)
    else:
        mask = offs < n_elements
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x * alpha, mask=mask)


def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, out, n, 2.0)
    return out
