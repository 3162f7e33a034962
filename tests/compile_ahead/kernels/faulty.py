"""A copy kernel whose compile misbehaves on purpose: BLOCK_SIZE 2048 kills the compile child, 4096 hangs it.

It wraps `triton.compile` at import, which only the compile child ever runs (tests/compile_ahead/test_compile.py).
"""

import os
import signal
import time

import triton
import triton.language as tl

_compile = triton.compile


def _misbehaving_compile(src, *args, **kwargs):
    block = src.constants.get((src.fn.arg_names.index("BLOCK_SIZE"),))
    if block == 2048:
        os.kill(os.getpid(), signal.SIGKILL)
    if block == 4096:
        time.sleep(3600)
    return _compile(src, *args, **kwargs)


triton.compile = _misbehaving_compile


@triton.jit
def copy_kernel(out_ptr, in_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(in_ptr + offsets, mask=mask), mask=mask)
