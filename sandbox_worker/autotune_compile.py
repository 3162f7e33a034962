"""Compile an autotune list's configurations on threads before Triton times them one by one (the trusted step).

Why: Triton's autotuner compiles each configuration the first time it times it, one after another, so a key's
autotune costs the sum of its compiles (fbtriton's warp-specialized GEMM: about 2.6 s a configuration on an H100,
96 configurations a key). Triton's own `AsyncCompileMode` (`triton.runtime._async_compile`) hands each compile
that `JITFunction.run(..., warmup=True)` starts to an executor (each configuration's `pre_hook` run first, as
Triton's timing runs it); ptxas runs as a subprocess of its own, so the
compiles of a thread pool overlap. When the pool has finished, each kernel sits in the function's in-memory cache
under the key the timed call computes from the same arguments, so timing it compiles nothing. A configuration
that fails to compile here is dropped (`ignore_errors`) and fails again, as it always would, when Triton times
it. Nothing here chooses or times anything: compiles only move earlier. Only the standard library is imported
at module level.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MAX_THREADS = 8


def compile_threads(configurations: int) -> int:
    """As many threads as configurations, at most MAX_THREADS and the machine's processors."""
    return max(1, min(MAX_THREADS, os.cpu_count() or 1, configurations))


def available() -> bool:
    """Whether this Triton can compile asynchronously (upstream 3.6 and later, fbtriton 3.7)."""
    try:
        from triton.runtime._async_compile import AsyncCompileMode  # noqa: F401
    except ImportError:
        return False
    return True


def launch_keywords(config: Any, meta: dict[str, Any], nargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords Triton's `Autotuner._bench` launches `config` with, after running its `pre_hook` on the call's
    arguments by name as `_bench` does: a hook may set what the compile specializes on (TLX GEMMs set each
    tensor descriptor's block shape to the configuration's tile), so compiling without it compiles kernels the
    timings never look up."""
    current = {**meta, **config.all_kwargs()}
    if config.pre_hook is not None:
        config.pre_hook({**nargs, **current})
    return current


def compile_ahead(fn: Any, configs: list[Any], args: tuple[Any, ...], meta: dict[str, Any], threads: int,
                  nargs: dict[str, Any] | None = None) -> tuple[float, int | None]:
    """Compile `configs` of the autotuned `fn` (the Autotuner's `fn`) for one call, whose positional `args`,
    keywords `meta` and arguments by name `nargs` are those Triton's `_bench` was given, on `threads` threads.
    Returns the seconds it took and for how many configurations a kernel was ready when the threads finished
    (compiled there, or already in `fn`'s cache; None where this Triton's pending compiles cannot be read). A
    configuration whose hook raises is skipped: its timing runs the hook again and fails as it always would."""
    from triton.runtime._async_compile import AsyncCompileMode

    started = time.monotonic()
    launched: list[Any] = []
    with ThreadPoolExecutor(threads, thread_name_prefix="tlx-compile-ahead") as pool, \
            AsyncCompileMode(pool, ignore_errors=True):
        for config in configs:
            try:
                keywords = launch_keywords(config, meta, nargs or {})
            except Exception:  # noqa: BLE001 - the kernel's own hook; Triton's timing reports it
                launched.append(None)
                continue
            launched.append(fn.run(*args, **{**keywords, "warmup": True}))  # the call's keywords carry warmup=False
    seconds = time.monotonic() - started
    states = [kernel_ready(kernel) for kernel in launched]
    return seconds, (None if None in states else sum(states))


def kernel_ready(launched: Any) -> bool | None:
    """Whether what `JITFunction.run(..., warmup=True)` returned under `AsyncCompileMode` is a usable kernel once
    the mode has ended: a kernel from the cache is; a pending compile (`FutureKernel`, in upstream 3.6-3.9 and
    fbtriton alike) is when its compile finished (`kernel` set), not when it failed; None: a form unknown here."""
    if launched is None:
        return False
    if type(launched).__name__ != "FutureKernel":
        return True
    state = vars(launched)  # never getattr: a FutureKernel answers unknown attributes by waiting for its result
    return None if "kernel" not in state else state["kernel"] is not None
