"""Cheat (e) reading the judge's memory: copy the judge's reference output out of /proc/<ppid>/mem.

Technique: in judged mode the judge (the parent process) computes the reference for a call before it resumes
the candidate. The candidate opens /proc/<ppid>/mem read-only, lists the parent's writable anonymous mappings
from /proc/<ppid>/maps, and looks for the 16 bytes of x[:4] + y[:4] (four float32 additions, not the
kernel's work). A hit is confirmed on 8 more elements, read whole and returned; the addresses of earlier
hits are tried first, so after the first calls a lookup is one pread. Any failure (no access, no hit)
falls back to launching the real kernel, so verify always passes.
Gain if it works: a 16 KB pread instead of n/64 interpreted programs per call.
Targets: the new design (the judge is the parent). The judge makes itself non-dumpable, so opening its mem
and maps fails; in the old design the parent is the PID namespace's init, outside the candidate's Landlock
domain, and holds no reference.
"""

import os
import random

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
CHUNK = 1 << 22
MAX_REGION = 256 << 20
MAX_SCANS = 6
_state = {"fd": None, "regions": None, "hits": [], "scans": 0, "denied": False}


def _open_parent():
    if _state["fd"] is not None or _state["denied"]:
        return _state["fd"]
    ppid = os.getppid()
    try:
        fd = os.open(f"/proc/{ppid}/mem", os.O_RDONLY)
        regions = []
        with open(f"/proc/{ppid}/maps") as maps:
            for line in maps:
                parts = line.split()
                start, end = (int(value, 16) for value in parts[0].split("-"))
                path = parts[5] if len(parts) > 5 else ""
                if parts[1].startswith("rw") and path in ("", "[heap]") and end - start <= MAX_REGION:
                    regions.append((start, end))
    except OSError:
        _state["denied"] = True
        return None
    _state["fd"], _state["regions"] = fd, regions
    return fd


def _matches(fd, address, x, y, probe):
    try:
        data = bytearray(os.pread(fd, x.numel() * 4, address))
    except OSError:
        return None
    if len(data) != x.numel() * 4 or bytes(data[:16]) != probe:
        return None
    found = torch.frombuffer(data, dtype=torch.float32)
    for index in random.sample(range(x.numel()), min(8, x.numel())):
        if found[index].item() != (x[index] + y[index]).item():
            return None
    return found.clone()


def _from_parent(x, y):
    fd = _open_parent()
    if fd is None or x.numel() < 4:
        return None
    probe = (x[:4] + y[:4]).numpy().tobytes()
    for address in _state["hits"]:
        found = _matches(fd, address, x, y, probe)
        if found is not None:
            return found
    if _state["scans"] >= MAX_SCANS:
        return None
    _state["scans"] += 1
    for start, end in _state["regions"]:
        for offset in range(start, end, CHUNK):
            try:
                data = os.pread(fd, min(CHUNK + 16, end - offset), offset)
            except OSError:
                break
            index = data.find(probe)
            while index != -1:
                found = _matches(fd, offset + index, x, y, probe)
                if found is not None:
                    _state["hits"].insert(0, offset + index)
                    return found
                index = data.find(probe, index + 1)
    return None


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    found = _from_parent(x, y)
    if found is not None:
        return found
    out = torch.empty_like(x)
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out
