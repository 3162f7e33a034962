"""Triton's per-process cache key, computed once in a trusted process before it forks.

Why: Triton keys every compiled kernel by `triton_key()`, a hash of its own Python files and of `libtriton.so`
(415 MB in triton 3.6), computed at a process's first kernel call and kept for the process (an lru_cache). Every
candidate process paid it in its first call: 0.6 s on this project's CPU machine, part of the 0.7-1.0 s first
call the H100 runs recorded per worker whether the kernel was compiled or found in the cache. A process forked
after the key is computed inherits it. The key depends only on the installed Triton, never on a candidate.
"""

from __future__ import annotations

import importlib
import time


def warm_triton_key() -> float | None:
    """Compute Triton's cache key once and return the seconds it took (None where this Triton has no such key:
    the process then computes it at its first call, as before). Initialises no device and starts no thread."""
    for module_name in ("triton.runtime.cache", "triton.compiler.compiler"):
        try:
            key = getattr(importlib.import_module(module_name), "triton_key", None)
        except ImportError:
            continue
        if callable(key):
            started = time.perf_counter()
            key()
            return time.perf_counter() - started
    return None
