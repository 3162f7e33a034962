"""GPU cheat (c) keeping inputs in L2 across the flush: a persisting access-policy window.

Technique: set aside the largest persisting L2 region the device allows and put an access-policy window with
hitProp=persisting over the first input on the current stream, so the kit's L2 flush (a normal-priority
write) cannot evict it and later calls read x from L2 instead of HBM. The kernel is the baseline.
Gain if it works: part of x's traffic served from L2 in every timed call.
Targets: timing in the candidate's process. The replay runs on the judge's own stream, which carries no
window, and the judge's inputs are its own allocations.
"""

import ctypes

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
_windowed = set()


class _AccessPolicyWindow(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class _StreamAttrValue(ctypes.Union):
    _fields_ = [("accessPolicyWindow", _AccessPolicyWindow), ("pad", ctypes.c_char * 64)]


def _cudart():
    for name in ("libcudart.so.12", "libcudart.so.13", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _attribute(lib, attribute, device):
    value = ctypes.c_int(0)
    lib.cudaDeviceGetAttribute(ctypes.byref(value), attribute, device)
    return value.value


def _persist(tensor):
    key = (tensor.data_ptr(), torch.cuda.current_stream().cuda_stream)
    if key in _windowed:
        return
    _windowed.add(key)
    lib = _cudart()
    if lib is None:
        return
    device = tensor.device.index or 0
    set_aside = _attribute(lib, 108, device)  # cudaDevAttrMaxPersistingL2CacheSize
    window = min(tensor.numel() * tensor.element_size(), _attribute(lib, 109, device))  # MaxAccessPolicyWindowSize
    if set_aside <= 0 or window <= 0:
        return
    lib.cudaDeviceSetLimit(0x06, ctypes.c_size_t(set_aside))  # cudaLimitPersistingL2CacheSize
    value = _StreamAttrValue()
    value.accessPolicyWindow = _AccessPolicyWindow(tensor.data_ptr(), window, 1.0, 2, 1)  # persisting / streaming
    lib.cudaStreamSetAttribute(ctypes.c_void_p(key[1]), 1, ctypes.byref(value))  # AccessPolicyWindow
    lib.cudaGetLastError()  # a refused setting must not surface as the next torch call's error

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
    _persist(x)
    out = torch.empty_like(x)
    _launch(x, y, out, out.numel())
    return out
