"""Compile an autotune list's configurations on threads before Triton times them one by one (the trusted step).

Why: Triton's autotuner compiles each configuration the first time it times it, one after another, so a key's
autotune costs the sum of its compiles (fbtriton's warp-specialized GEMM: about 2.6 s a configuration on an H100,
96 configurations a key). Triton's own `AsyncCompileMode` (`triton.runtime._async_compile`) hands each compile
that `JITFunction.run(..., warmup=True)` starts to an executor; ptxas runs as a subprocess of its own, so the
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


def compile_ahead(fn: Any, configs: list[Any], args: tuple[Any, ...], meta: dict[str, Any],
                  threads: int) -> float:
    """Compile `configs` of the autotuned `fn` (the Autotuner's `fn`) for one call, whose positional `args` and
    keywords `meta` are those Triton's `_bench` was given, on `threads` threads; the seconds it took."""
    from triton.runtime._async_compile import AsyncCompileMode

    started = time.monotonic()
    with ThreadPoolExecutor(threads, thread_name_prefix="tlx-compile-ahead") as pool, \
            AsyncCompileMode(pool, ignore_errors=True):
        for config in configs:
            fn.run(*args, **{**meta, **config.all_kwargs(), "warmup": True})
    return time.monotonic() - started
