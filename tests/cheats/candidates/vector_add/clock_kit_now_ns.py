"""Cheat (a) rewriting the clock: the timing kit's `_now_ns` runs 8x slow.

Technique: at import (inside the worker, during `build`) reassign `timing._now_ns`, the clock the kit captured
from `time.perf_counter_ns` before any candidate ran, to a function that returns an eighth of the real
nanoseconds. `_measure_cpu.take_sample` looks `_now_ns` up at call time, so every sample shrinks 8x.
The kernel itself is the baseline (BLOCK_SIZE 64), so verify passes on its merits.
Gain if it works: an 8x "speedup" of an unchanged kernel.
Targets: the old design (clock in the candidate's process). In judged mode the clock lives in the judge.
"""

import sys
import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64

_real_ns = time.perf_counter_ns
_timing = sys.modules.get("sandbox_worker.harness_kit.timing")
if _timing is not None:
    _timing._now_ns = lambda: _real_ns() // 8


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
