"""Cheat (a) rewriting the samples: `sampling.collect` hands back every sample divided by 6.

Technique: at import wrap the sampler the timing kit calls (`timing.collect`, imported there by name, and
`sampling.collect` for any later importer); the wrapper runs the real sampler, divides each sample by 6
and rebuilds the running statistics from the shrunken samples, so the RSE and the stop reason stay
self-consistent. The kernel is the baseline (BLOCK_SIZE 64) and verifies on its merits.
Gain if it works: a 6x "speedup" of an unchanged kernel.
Targets: the old design (sampler in the candidate's process). In judged mode the judge runs its own sampler.
"""

import sys

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
SHRINK = 6.0


def _wrap(collect):
    def shrunk_collect(take_sample, limits):
        samples, output, reason, stats = collect(take_sample, limits)
        scaled = [sample / SHRINK for sample in samples]
        fresh = type(stats)()
        for sample in scaled:
            fresh.add(sample)
        return scaled, output, reason, fresh

    return shrunk_collect


for _name in ("sandbox_worker.harness_kit.timing", "sandbox_worker.harness_kit.sampling"):
    _module = sys.modules.get(_name)
    if _module is not None and hasattr(_module, "collect"):
        _module.collect = _wrap(_module.collect)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out
