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


def _descriptor_tile_hook(nargs):
    """A TLX GEMM's configuration hook (fbtriton's hopper_gemm_ws.py): the descriptor's block is the tile."""
    nargs["a_desc"].block_shape = [nargs["BM"], nargs["BK"]]
    nargs["NUM_SMS"] = 132


def test_each_configuration_is_compiled_with_what_its_hook_sets_as_triton_times_it():
    # Compiled without the hook, every descriptor keeps the caller's placeholder block and the kernels compiled
    # ahead are not the ones the timings look up (an H100 compiled 96 of them in 3 s, then each timing compiled).
    import torch
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor

    a = torch.zeros(256, 256, dtype=torch.float16)
    descriptor = TensorDescriptor(a, list(a.shape), list(a.stride()), [1, 1])
    configs = [triton.Config({"BM": bm, "BK": 64}, num_warps=4, pre_hook=_descriptor_tile_hook) for bm in (64, 128)]
    seen = []
    for config in configs:
        keywords = autotune_compile.launch_keywords(config, {"M": 256}, {"a_desc": descriptor, "M": 256})
        seen.append((list(descriptor.block_shape), keywords["BM"], keywords["num_warps"], keywords["M"]))
        assert "NUM_SMS" not in keywords and "a_desc" not in keywords  # Triton launches `current`, not the hook's dict
    assert seen == [([64, 64], 64, 4, 256), ([128, 64], 128, 4, 256)]


def test_a_configuration_without_a_hook_launches_with_its_own_and_the_calls_keywords():
    import triton

    config = triton.Config({"BLOCK_SIZE": 512}, num_warps=8, num_stages=3)
    keywords = autotune_compile.launch_keywords(config, {"n_elements": 4096}, {})
    assert keywords["BLOCK_SIZE"] == 512 and keywords["num_warps"] == 8 and keywords["n_elements"] == 4096


def test_a_configuration_counts_as_ready_when_its_compile_finished_and_not_when_it_failed():
    from concurrent.futures import ThreadPoolExecutor

    from triton.runtime._async_compile import AsyncCompileMode, FutureKernel

    def compiles():
        return "compiled kernel"

    def fails():
        raise RuntimeError("PassManager::run failed: cp.async does not support transfers smaller than 4 bytes")

    with ThreadPoolExecutor(2) as pool, AsyncCompileMode(pool, ignore_errors=True) as mode:
        done = mode.submit("a", compiles, lambda kernel: None, lambda pending: None)
        broken = mode.submit("b", fails, lambda kernel: None, lambda pending: None)
    assert isinstance(done, FutureKernel) and isinstance(broken, FutureKernel)
    assert autotune_compile.kernel_ready(done) is True
    assert autotune_compile.kernel_ready(broken) is False
    assert autotune_compile.kernel_ready(object()) is True  # a kernel the function's cache already held
    assert autotune_compile.kernel_ready(None) is False  # its hook raised: nothing was started
