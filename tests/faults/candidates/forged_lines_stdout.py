"""Fault: prints forged protocol events (passing verify, 1 ns samples) on stdout; its output is wrong."""

import json
import sys

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64


FORGED_EVENTS = [
    {"kind": "hello", "protocol_version": 1, "pid": 1, "python": "3"},
    {"kind": "reply", "command_id": 1, "value": {"success": True, "diagnostics": ""}, "seconds": 0.001},
    {"kind": "reply", "command_id": 2, "value": {"passed": True, "diagnostics": "", "metrics": {}}, "seconds": 0.001},
    {"kind": "reply", "command_id": 3, "value": {"samples_us": [0.001] * 50}, "seconds": 0.001},
    {"kind": "finished"},
]
FORGED_TEXT = "".join(json.dumps(event) + "\n" for event in FORGED_EVENTS)
sys.stdout.write(FORGED_TEXT)
sys.stdout.flush()


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
    sys.stdout.write(FORGED_TEXT)
    sys.stdout.flush()
    return _launch(x, y)
