"""Fault: a setsid() escapee that keeps forking children that sleep forever; output wrong."""

import os
import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64


_child = os.fork()
if _child == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(300):
            if os.fork() == 0:
                while True:
                    time.sleep(1)
            time.sleep(0.01)
        while True:
            time.sleep(1)
    os._exit(0)
os.waitpid(_child, 0)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x - y, mask=mask)


def _launch(x, y):
    out = torch.empty_like(x)
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


def vector_add(x, y):
    return _launch(x, y)
