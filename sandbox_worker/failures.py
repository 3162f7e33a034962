"""Failure events: what the worker sends when a harness or candidate call raises.

Every exception (SystemExit included) becomes one `failure` event whose category the orchestrator acts
on: `resource_limit` (memory, file size, open files, processes or threads, with the limit that was hit),
`sandbox_violation` (an operation the sandbox refused), `build` (Triton could not compile the kernel for
the device: a resource limit, ptxas or a compile error) or `exception`. Texts are clipped so that one
event stays small.
"""

from __future__ import annotations

import errno
import resource
import traceback
from typing import Any

MAX_TEXT = 20_000


def clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 40] + f"... [{len(text) - limit + 40} chars cut]"


def _is_allocation_failure(exc: BaseException) -> bool:
    """MemoryError, ENOMEM, or torch's allocator failing (a RuntimeError / OutOfMemoryError)."""
    if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
        return True
    text = str(exc).lower()
    return type(exc).__name__ == "OutOfMemoryError" or (
        isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text))


# Triton compiles a kernel on its first launch, so these arrive from verify on a GPU; they mean the kernel
# cannot be built for this device (a shared-memory or register limit, a ptxas or a compile error), not that
# it computed a wrong answer. The autotuner skips configurations on exactly these.
BUILD_ERRORS = frozenset({"OutOfResources", "PTXASError", "CompilationError", "CompileTimeAssertionFailure"})


def _is_build_failure(exc: BaseException) -> bool:
    return any(kind.__module__.startswith("triton.") and kind.__name__ in BUILD_ERRORS for kind in type(exc).__mro__)


def _classify(exc: BaseException) -> str:
    if _is_build_failure(exc):
        return "build"
    if _is_allocation_failure(exc):
        return "resource_limit"
    if isinstance(exc, OSError) and exc.errno in (errno.EFBIG, errno.EMFILE, errno.ENFILE, errno.EAGAIN):
        return "resource_limit"
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.ENETUNREACH, errno.EROFS):
        return "sandbox_violation"
    return "exception"


def _soft_limit(kind: int) -> str:
    soft, _hard = resource.getrlimit(kind)
    if soft == resource.RLIM_INFINITY:
        return "unlimited"
    if kind == resource.RLIMIT_NOFILE:
        return str(soft)
    if soft >= 1 << 30:
        return f"{soft / (1 << 30):.2f} GiB"
    return f"{soft / (1 << 20):.2f} MiB" if soft >= 1 << 20 else f"{soft} bytes"


def _limit_hit(exc: BaseException) -> str:
    """Which limit a resource_limit failure ran into, for the one-line reason."""
    if _is_allocation_failure(exc):
        if "cuda" in str(exc).lower():
            return "GPU memory"
        return f"memory (RLIMIT_DATA {_soft_limit(resource.RLIMIT_DATA)})"
    number = getattr(exc, "errno", None)
    if number == errno.EFBIG:
        return f"file size (RLIMIT_FSIZE {_soft_limit(resource.RLIMIT_FSIZE)})"
    if number == errno.EMFILE:
        return f"open files (RLIMIT_NOFILE {_soft_limit(resource.RLIMIT_NOFILE)})"
    if number == errno.ENFILE:
        return "the system-wide open file table"
    return "processes or threads (EAGAIN)"


def failure_event(command_id: int | None, phase: str, exc: BaseException) -> dict[str, Any]:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, SystemExit):
        message = f"SystemExit({exc.code!r}) raised during {phase}"
    category = _classify(exc)
    if category == "resource_limit":
        detail = "" if message == type(exc).__name__ else f": {clip(message, 1000)}"
        message = f"{_limit_hit(exc)} exhausted: {type(exc).__name__}{detail}"
    return {
        "kind": "failure",
        "command_id": command_id,
        "phase": phase,
        "error_type": type(exc).__name__[:200],
        "message": clip(message),
        "traceback": clip("".join(traceback.format_exception(type(exc), exc, exc.__traceback__))),
        "category": category,
    }
