"""Fault: writes into the parent's Triton cache ($HOME of its uid) and /tmp/triton_cache_poison, swallowing errors."""

import os
import pwd

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


def _launch(x, y):
    out = torch.empty_like(x)
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


def vector_add(x, y):
    home = pwd.getpwuid(os.getuid()).pw_dir
    for directory in (os.path.join(home, ".triton", "cache", "__MARKER__"),
                      "/tmp/triton_cache_poison/__MARKER__"):
        try:
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, "add_kernel.json"), "w") as poison:
                poison.write("{}")
        except OSError:
            pass
    return _launch(x, y)
