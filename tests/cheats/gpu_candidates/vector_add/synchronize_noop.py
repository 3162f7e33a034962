"""GPU cheat (a) rewriting the clock: synchronisation made a no-op, work left running past the window.

Technique: at import, replace `torch.cuda.synchronize`, `torch.cuda.Event.synchronize` and
`torch.cuda.Event.elapsed_time` so that nothing waits for the GPU and an unfinished event pair reports the
time the host took to enqueue (about zero). The kernel is the baseline and correct when waited for.
Gain if it works: samples of launch overhead only.
Targets: timing in the candidate's process; the judge synchronises and times in its own process.
"""

import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64

_host_times = {}


def _record(self, stream=None):
    _host_times[id(self)] = time.perf_counter()


def _elapsed(self, end):
    return max((_host_times.get(id(end), 0.0) - _host_times.get(id(self), 0.0)) * 1e3, 1e-4)


torch.cuda.synchronize = lambda device=None: None
torch.cuda.Event.synchronize = lambda self: None
torch.cuda.Event.record = _record
torch.cuda.Event.elapsed_time = _elapsed


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def _launch(x, y, out, n_elements):
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _launch(x, y, out, out.numel())
    return out
