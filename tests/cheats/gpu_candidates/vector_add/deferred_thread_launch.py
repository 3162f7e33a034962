"""GPU cheat (c) deferring the work past the timed window: a thread launches the kernel later.

Technique: return the output buffer at once and let a background thread launch the kernel a moment later,
so the call's events close before the work is enqueued. A check that comes after a device-wide
synchronise and a short pause sees the right values.
Gain if it works: the time of an allocation.
Targets: timing in the candidate's process. In judged mode the recorded call launched nothing (refused), and
the candidate process is stopped as soon as it replies.
"""

import threading
import time

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


def _launch(x, y, out, n_elements):
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)


def _later(x, y, out, n, stream):
    time.sleep(0.0005)
    with torch.cuda.stream(stream):
        _launch(x, y, out, n)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    threading.Thread(target=_later, args=(x, y, out, out.numel(), torch.cuda.current_stream()),
                     daemon=True).start()
    return out
