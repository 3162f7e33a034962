"""Compiling an autotune list ahead of its timings (sandbox_worker/autotune_compile.py): the part a CPU can check.

The compile itself needs a GPU backend (Triton has none for the CPU; its interpreter compiles nothing, and the
guard does not compile ahead there: tests/autotune/test_step.py); `scripts/gpu/autotune_compile_threads.py`
measures it on a GPU."""

from __future__ import annotations

import os

from sandbox_worker import autotune_compile


def test_threads_are_bounded_by_the_list_the_machine_and_the_cap():
    assert autotune_compile.compile_threads(1) == 1
    assert autotune_compile.compile_threads(3) == min(3, os.cpu_count() or 1)
    assert autotune_compile.compile_threads(500) == min(autotune_compile.MAX_THREADS, os.cpu_count() or 1)


def test_the_installed_triton_compiles_asynchronously():
    # upstream 3.6 (the GPU host's), 3.9 (this suite's) and fbtriton 3.7 carry triton.runtime._async_compile
    assert autotune_compile.available()
