"""The harness as the worker sees it: importing `harness.py`, the functions it must define, and its
return values turned into protocol values (`normalize_*`), refused with `HarnessContractError` when
they fall outside the bundle contract.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from sandbox_worker.failures import clip

REQUIRED_FUNCTIONS = ("build", "verify", "benchmark")


class HarnessContractError(Exception):
    """The harness returned something outside the bundle contract."""



def import_harness(path: str) -> ModuleType:
    harness_path = Path(path)
    sys.path.insert(0, str(harness_path.parent))
    spec = importlib.util.spec_from_file_location("tlx_agent_harness", harness_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import harness {harness_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["tlx_agent_harness"] = module
    spec.loader.exec_module(module)
    return module


def profile_arity(function: Any) -> int | None:
    if function is None:
        return None
    try:
        inspect.signature(function).bind(object(), {}, {})
        return 3
    except TypeError:
        return 2


# ---- normalizers: harness return values -> protocol values -------------------------------------


def normalize_build(value: Any) -> tuple[dict[str, Any], Any]:
    if isinstance(value, dict) and "success" in value:
        success = bool(value["success"])
        return {"success": success, "diagnostics": clip(str(value.get("diagnostics", "")))}, value.get("artifact")
    return {"success": True, "diagnostics": ""}, value


def normalize_verify(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"passed": value, "diagnostics": "", "metrics": {}}
    if isinstance(value, dict) and "passed" in value:
        metrics = value.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise HarnessContractError("verify() metrics must be a dict")
        return {
            "passed": value["passed"] is True,
            "diagnostics": clip(str(value.get("diagnostics", ""))),
            "metrics": _json_safe(metrics),
        }
    raise HarnessContractError(f"verify() must return bool or {{'passed': ...}}, got {type(value).__name__}")


def normalize_benchmark(value: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if isinstance(value, dict):
        samples = value.get("samples_us")
        extra = {
            "warmup_count": value.get("warmup_count"),
            "cache_policy": None if value.get("cache_policy") is None else str(value["cache_policy"])[:200],
            "metrics": _json_safe(value.get("metrics") or {}),
        }
    else:
        samples = value
    try:
        samples = [float(s) for s in samples]
    except (TypeError, ValueError) as exc:
        raise HarnessContractError(f"benchmark() samples must be numbers in microseconds: {exc}") from None
    if not samples:
        raise HarnessContractError("benchmark() returned no samples")
    if not all(math.isfinite(s) and s > 0 for s in samples):
        raise HarnessContractError("benchmark() samples must be finite and > 0 microseconds")
    return {"samples_us": samples, **extra}


def _json_safe(value: Any, depth: int = 0) -> Any:
    """Turn harness output into plain JSON; non-finite floats become None (null, never a fake number)."""
    if depth > 12:
        return str(value)[:200]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v, depth + 1) for v in value]
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return _json_safe(item(), depth + 1)
        except Exception:  # noqa: BLE001 - fall back to text
            pass
    return str(value)[:1000]
