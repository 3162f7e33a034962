"""Cheat (c) doing less work when timed: return a lazy tensor subclass that computes on first use.

Technique: `vector_add` returns a `torch.Tensor` subclass over an uninitialised buffer that remembers its
operands; its `__torch_function__` launches the real kernel the first time any torch operation touches it.
The timed call itself only allocates; the work happens later, when (and if) someone reads the output,
outside the timer.
Gain if it works: an allocation instead of n/64 interpreted programs inside the timed window.
Targets: both designs. The old design rejects any output that is not exactly `torch.Tensor`; in judged mode
the candidate process reports the type it returned and the judge rejects it.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


class DeferredSum(torch.Tensor):
    """x + y, computed the first time a torch operation reads it."""

    @staticmethod
    def __new__(cls, x, y):
        return torch.Tensor._make_subclass(cls, torch.empty_like(x))

    def __init__(self, x, y):
        self.operands = (x, y)

    def materialize(self):
        operands = self.__dict__.pop("operands", None)
        if operands is not None:
            x, y = operands
            with torch._C.DisableTorchFunctionSubclass():
                plain = self.as_subclass(torch.Tensor)
                n_elements = plain.numel()
                grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
                add_kernel[grid](x, y, plain, n_elements, BLOCK_SIZE=BLOCK_SIZE)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for arg in args:
            if isinstance(arg, DeferredSum):
                arg.materialize()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return DeferredSum(x, y)
