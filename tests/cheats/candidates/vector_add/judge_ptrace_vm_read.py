"""Cheat (e) reading the judge's memory: ptrace-attach the judge, read its reference with process_vm_readv.

Technique: like reading /proc/<ppid>/mem, but through the system calls a debugger uses, called with ctypes:
`ptrace(PTRACE_SEIZE)` on the parent (a tracer may read its tracee's maps and memory whatever its
dumpable flag), then `process_vm_readv` over the parent's writable anonymous mappings looking for the 16
bytes of x[:4] + y[:4]. A hit is confirmed on 8 more elements and returned; earlier hits are tried first.
Any refusal falls back to launching the real kernel, so verify always passes.
Gain if it works: one process_vm_readv instead of n/64 interpreted programs per call.
Targets: the new design (the judge is the parent). The worker's seccomp filter refuses ptrace and
process_vm_readv (EPERM), and a non-dumpable judge refuses its maps; in the old design the parent is the
PID namespace's init, outside the candidate's Landlock domain, and holds no reference.
"""

import ctypes
import os
import random

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
PTRACE_SEIZE = 0x4206
PTRACE_DETACH = 17
SYSCALLS = {"x86_64": {"ptrace": 101, "process_vm_readv": 310},
            "aarch64": {"ptrace": 117, "process_vm_readv": 270}}
CHUNK = 1 << 22
MAX_REGION = 256 << 20
MAX_SCANS = 6
_libc = ctypes.CDLL(None, use_errno=True)
_state = {"ready": None, "regions": [], "hits": [], "scans": 0}


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


def _syscall(name, *args):
    number = SYSCALLS.get(os.uname().machine, {}).get(name)
    if number is None:
        return -1
    return _libc.syscall(number, *args)


def _read(pid, address, size):
    buffer = ctypes.create_string_buffer(size)
    local = _IoVec(ctypes.cast(buffer, ctypes.c_void_p), size)
    remote = _IoVec(ctypes.c_void_p(address), size)
    count = _syscall("process_vm_readv", ctypes.c_int(pid), ctypes.byref(local), ctypes.c_ulong(1),
                     ctypes.byref(remote), ctypes.c_ulong(1), ctypes.c_ulong(0))
    return buffer.raw[:count] if count > 0 else None


def _attach():
    if _state["ready"] is not None:
        return _state["ready"]
    ppid = os.getppid()
    seized = _syscall("ptrace", ctypes.c_long(PTRACE_SEIZE), ctypes.c_long(ppid), None, None) == 0
    try:
        with open(f"/proc/{ppid}/maps") as maps:
            for line in maps:
                parts = line.split()
                start, end = (int(value, 16) for value in parts[0].split("-"))
                path = parts[5] if len(parts) > 5 else ""
                if parts[1].startswith("rw") and path in ("", "[heap]") and end - start <= MAX_REGION:
                    _state["regions"].append((start, end))
    except OSError:
        pass
    if seized:
        _syscall("ptrace", ctypes.c_long(PTRACE_DETACH), ctypes.c_long(ppid), None, None)
    _state["ready"] = bool(_state["regions"]) and _read(ppid, _state["regions"][0][0], 8) is not None
    return _state["ready"]


def _confirmed(address, x, y, probe):
    data = _read(os.getppid(), address, x.numel() * 4)
    if data is None or len(data) != x.numel() * 4 or data[:16] != probe:
        return None
    found = torch.frombuffer(bytearray(data), dtype=torch.float32)
    for index in random.sample(range(x.numel()), min(8, x.numel())):
        if found[index].item() != (x[index] + y[index]).item():
            return None
    return found.clone()


def _from_parent(x, y):
    if x.numel() < 4 or not _attach():
        return None
    probe = (x[:4] + y[:4]).numpy().tobytes()
    for address in _state["hits"]:
        found = _confirmed(address, x, y, probe)
        if found is not None:
            return found
    if _state["scans"] >= MAX_SCANS:
        return None
    _state["scans"] += 1
    for start, end in _state["regions"]:
        for offset in range(start, end, CHUNK):
            data = _read(os.getppid(), offset, min(CHUNK + 16, end - offset))
            if data is None:
                break
            index = data.find(probe)
            while index != -1:
                found = _confirmed(offset + index, x, y, probe)
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
