"""Call the harness's profile function (structured or legacy) and keep its reply compact.

Profile output over 1 MB is spilled to `<artifacts_dir>/raw_profile.json` and replaced by a pointer.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from typing import Any

INLINE_LIMIT_BYTES = 1_000_000


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def call_profile(function: Any, artifact: Any, case: dict[str, Any], request: dict[str, Any]) -> Any:
    try:
        inspect.signature(function).bind(object(), {}, {})
    except TypeError:
        return function(artifact, case)  # legacy two-argument form: summary with default tools
    return function(artifact, case, request)


def compact(payload: dict[str, Any], artifacts_dir: str) -> dict[str, Any]:
    encoded = json.dumps(payload, default=str, allow_nan=False)
    if len(encoded.encode()) <= INLINE_LIMIT_BYTES:
        return json.loads(encoded)
    directory = Path(artifacts_dir)
    directory.mkdir(parents=True, exist_ok=True)
    spill = directory / "raw_profile.json"
    spill.write_text(encoded, encoding="utf-8")
    return {"spilled": True, "artifact": str(spill), "size_bytes": len(encoded.encode()),
            "keys": sorted(payload)[:64]}


def run_profile(harness: Any, artifact: Any, case: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    function = getattr(harness, "profile", None)
    if function is None:
        return {"available": False, "diagnostics": ["harness defines no profile(); profiling skipped"]}
    Path(request["artifacts_dir"]).mkdir(parents=True, exist_ok=True)
    value = call_profile(function, artifact, case, request)
    if not isinstance(value, dict):
        raise TypeError(f"profile() must return a JSON object, got {type(value).__name__}")
    return compact(_finite(value), request["artifacts_dir"])


def run_judged_profile(judge: Any, case: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The profile of a GPU judge: Proton over its replay of the candidate's recorded launches."""
    Path(request["artifacts_dir"]).mkdir(parents=True, exist_ok=True)
    return compact(_finite(judge.profile(case, request)), request["artifacts_dir"])
