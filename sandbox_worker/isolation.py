"""Isolation layers the worker applies to itself before the harness or the candidate is imported.

Each layer reports `active`, `degraded:<reason>` or `unavailable:<reason>`. Layers that need a
single-threaded process (user/net namespaces) must run before torch is imported, which is why the
worker applies them right after setup and before loading the harness.
"""

from __future__ import annotations

import os
import resource
from typing import Any


def _set_limit(kind: int, value: int) -> None:
    soft, hard = resource.getrlimit(kind)
    new_hard = value if hard == resource.RLIM_INFINITY or hard > value else hard
    resource.setrlimit(kind, (min(value, new_hard), new_hard))


def apply_rlimits(config: dict[str, Any]) -> str:
    """CORE=0, NOFILE, FSIZE, CPU backstop, DATA (configurable). Never AS: CUDA reserves huge VA ranges."""
    applied: list[str] = []
    try:
        _set_limit(resource.RLIMIT_CORE, 0)
        applied.append("core")
        if config.get("open_files"):
            _set_limit(resource.RLIMIT_NOFILE, int(config["open_files"]))
            applied.append("nofile")
        if config.get("file_size_bytes"):
            _set_limit(resource.RLIMIT_FSIZE, int(config["file_size_bytes"]))
            applied.append("fsize")
        if config.get("cpu_seconds"):
            seconds = int(config["cpu_seconds"])
            soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
            resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
            applied.append("cpu")
        if config.get("data_limit_bytes"):
            _set_limit(resource.RLIMIT_DATA, int(config["data_limit_bytes"]))
            applied.append("data")
    except (OSError, ValueError) as exc:
        return f"degraded:{type(exc).__name__}: {exc} (applied {','.join(applied) or 'none'})"
    return "active"


def apply_layers(config: dict[str, Any]) -> dict[str, str]:
    """Apply every configured layer in order; return the status of each."""
    if config.get("mode") == "off":
        return {"rlimits": "unavailable:isolation off"}
    statuses = {"stdin": "active" if not os.isatty(0) else "degraded:stdin is a tty"}
    statuses["rlimits"] = apply_rlimits(config)
    return statuses
