"""Resource limits the worker sets on itself: CORE=0, NOFILE, FSIZE, CPU backstop, DATA.

Never RLIMIT_AS: CUDA reserves address space far beyond physical memory at init (about twice the
device memory for the memory pool alone), so an AS cap breaks GPU workers. RLIMIT_DATA counts only
private writable mappings, which is what a host-memory hog grows, and leaves CUDA's PROT_NONE
reservations alone. Hard limits are lowered too, so the candidate cannot raise them back (unless it
still holds CAP_SYS_RESOURCE in the initial user namespace, which the network layer's user namespace
takes away).
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from typing import Any

DEFAULT_DATA_LIMIT_BYTES = 8 << 30  # seen working with CUDA + Triton on the H200 host
CPU_HARD_MARGIN_SECONDS = 5  # SIGXCPU at the soft limit, SIGKILL this much later


def _lower(kind: int, soft: int, hard: int | None = None) -> None:
    """Set (soft, hard) but never above the current hard limit (raising it would fail or widen it)."""
    _, current_hard = resource.getrlimit(kind)
    wanted_hard = soft if hard is None else hard
    if current_hard != resource.RLIM_INFINITY:
        wanted_hard = min(wanted_hard, current_hard)
    resource.setrlimit(kind, (min(soft, wanted_hard), wanted_hard))


def data_limit_bytes(config: dict[str, Any]) -> int | None:
    """The DATA cap to apply: the configured value, the default when unset, none when 0 or negative."""
    value = config.get("data_limit_bytes")
    if value is None:
        return DEFAULT_DATA_LIMIT_BYTES
    return int(value) if int(value) > 0 else None


def _planned_limits(config: dict[str, Any]) -> list[tuple[str, int, Callable[[], tuple[int, int | None]]]]:
    """(name, RLIMIT_*, soft/hard maker); values are converted late so one bad value spoils only its limit."""
    plan: list[tuple[str, int, Callable[[], tuple[int, int | None]]]] = [
        ("core", resource.RLIMIT_CORE, lambda: (0, 0))]
    if config.get("open_files"):
        plan.append(("nofile", resource.RLIMIT_NOFILE, lambda: (int(config["open_files"]), None)))
    if config.get("file_size_bytes"):
        plan.append(("fsize", resource.RLIMIT_FSIZE, lambda: (int(config["file_size_bytes"]), None)))
    if config.get("cpu_seconds"):
        plan.append(("cpu", resource.RLIMIT_CPU,
                     lambda: (int(config["cpu_seconds"]), int(config["cpu_seconds"]) + CPU_HARD_MARGIN_SECONDS)))
    plan.append(("data", resource.RLIMIT_DATA, lambda: (data_limit_bytes(config) or -1, None)))
    return plan


def apply_rlimits(config: dict[str, Any]) -> str:
    """Apply the limits and return the layer status; a limit that cannot be set degrades the layer."""
    applied: list[str] = []
    problems: list[str] = []
    for name, kind, make in _planned_limits(config):
        try:
            soft, hard = make()
            if soft < 0:
                problems.append(f"{name}: disabled by configuration")
                continue
            _lower(kind, soft, hard)
            applied.append(name)
        except (OSError, ValueError, TypeError) as exc:
            problems.append(f"{name}: {exc}")
    if problems:
        return f"degraded:{'; '.join(problems)} (applied {','.join(applied) or 'none'})"
    return "active"
