"""Reading Proton's output (pure): a `.hatchet` tree into per-kernel totals and per-call attribution,
and an instrumentation `.chrome_trace` into per-scope totals.

The figures are defined in `proton` (the module that collects them): every `*_us` is per call of the
profiled function, and `wrapper_us` is null, never 0, when the tree cannot measure it.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

CALL_SCOPE_PREFIX = "tlx_agent_call_"
_CALL_SCOPE = re.compile(rf"^{CALL_SCOPE_PREFIX}(\d+)$")
TIME_NS = "time (ns)"
CPU_TIME_NS = "cpu_time (ns)"


def unavailable_attribution(diagnostics: list[str], *, main_scope: str | None = None) -> dict[str, Any]:
    return {"available": False, "schema": "tlx_proton_launch_v1", "main_scope": main_scope, "calls": None,
            "call_us": None, "wrapper_us": None, "main_kernel_us": None, "non_main_kernel_us": None,
            "total_kernel_us": None, "kernels": [], "device": None, "diagnostics": list(diagnostics),
            "artifacts": {}}


# ---- hatchet parsing (pure) ---------------------------------------------------------------------------


def _load(payload_or_path: Any) -> Any:
    if isinstance(payload_or_path, (str, Path)):
        return json.loads(Path(payload_or_path).read_text(encoding="utf-8"))
    return payload_or_path


def _is_kernel(node: dict[str, Any]) -> bool:
    metrics = node.get("metrics") or {}
    return TIME_NS in metrics and ("device_type" in metrics or "device_id" in metrics)


def _name(node: dict[str, Any]) -> str:
    return str((node.get("frame") or {}).get("name", ""))


def _kernels_under(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every kernel node at or below `node` (Proton stores exclusive metrics, so summing is safe)."""
    found: list[dict[str, Any]] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if _is_kernel(current):
            found.append(current)
        stack.extend(child for child in current.get("children") or [] if isinstance(child, dict))
    return found


def _call_scopes(root: dict[str, Any]) -> list[dict[str, Any]]:
    scopes: list[dict[str, Any]] = []
    stack = [root]
    while stack:
        current = stack.pop()
        if _CALL_SCOPE.match(_name(current)):
            scopes.append(current)
            continue
        stack.extend(child for child in current.get("children") or [] if isinstance(child, dict))
    return sorted(scopes, key=lambda node: int(_CALL_SCOPE.match(_name(node)).group(1)))  # type: ignore[union-attr]


def _time_ns(node: dict[str, Any]) -> float:
    return float((node.get("metrics") or {}).get(TIME_NS) or 0.0)


def _split_ns(kernels: list[dict[str, Any]], main_scope: str | None) -> tuple[float, float]:
    main = sum(_time_ns(k) for k in kernels if main_scope is not None and _name(k) == main_scope)
    return main, sum(_time_ns(k) for k in kernels) - main


def _median_us(values_ns: list[float]) -> float | None:
    return statistics.median(values_ns) / 1000.0 if values_ns else None


def parse_hatchet(payload_or_path: Any, main_scope: str | None = None, *, calls: int | None = None) -> dict[str, Any]:
    """Per-kernel totals and per-call wrapper/main/non-main attribution from a Proton `.hatchet`.

    `payload_or_path` is the parsed JSON list `[root, device_info]` or a path to it. `main_scope` is the
    exact kernel name treated as the main launch. Without CPU-timed call scopes (a hatchet written by
    other code) the per-call figures divide totals by `calls`, else by the main kernel's launch count
    (one main launch per call, stated as a diagnostic), and `wrapper_us` is null.
    """
    data = _load(payload_or_path)
    diagnostics: list[str] = []
    result = unavailable_attribution([], main_scope=main_scope)
    result["diagnostics"] = diagnostics
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        diagnostics.append("hatchet payload is not a JSON list [root, device_info]; attribution unavailable")
        return result
    root = data[0]
    result["available"] = True
    if len(data) > 1 and isinstance(data[1], dict):
        result["device"] = _device_summary(data[1])

    kernels = _kernels_under(root)
    by_name: dict[str, dict[str, float]] = {}
    for kernel in kernels:
        entry = by_name.setdefault(_name(kernel), {"time_ns": 0.0, "count": 0.0})
        entry["time_ns"] += _time_ns(kernel)
        entry["count"] += float((kernel.get("metrics") or {}).get("count") or 0)
    result["kernels"] = [
        {"name": name, "time_us": entry["time_ns"] / 1000.0, "count": int(entry["count"]),
         "per_launch_us": entry["time_ns"] / 1000.0 / entry["count"] if entry["count"] else None,
         "is_main": main_scope is not None and name == main_scope}
        for name, entry in sorted(by_name.items(), key=lambda item: -item[1]["time_ns"])
    ]
    if not kernels:
        diagnostics.append("hatchet holds no kernel launches (no node with time (ns) and a device)")
    if main_scope is None:
        diagnostics.append("main_scope is not set (target.json main_scope): main/non-main split is null")
    elif main_scope not in by_name:
        diagnostics.append(f"main_scope {main_scope!r} matched no kernel; kernels seen: {sorted(by_name)[:10]}")

    scopes = _call_scopes(root)
    if scopes:
        _attribute_per_call(result, scopes, main_scope, diagnostics)
        return result

    main_total, non_main_total = _split_ns(kernels, main_scope)
    call_count = calls
    if call_count is None and main_scope is not None and main_scope in by_name and by_name[main_scope]["count"]:
        call_count = int(by_name[main_scope]["count"])
        diagnostics.append(f"no per-call scopes in the hatchet: assuming one {main_scope} launch per call "
                           f"({call_count} calls)")
    result["calls"] = call_count
    diagnostics.append(f"no CPU-timed call scope ({CALL_SCOPE_PREFIX}<i>) in the hatchet: wrapper_us is "
                       "not measurable and is null")
    if call_count:
        known_main = main_scope is not None and main_scope in by_name
        result["main_kernel_us"] = main_total / 1000.0 / call_count if known_main else None
        result["non_main_kernel_us"] = non_main_total / 1000.0 / call_count if main_scope is not None else None
        result["total_kernel_us"] = (main_total + non_main_total) / 1000.0 / call_count
    elif kernels:
        diagnostics.append("number of calls unknown: per-call kernel times are null (see kernels[].per_launch_us)")
    return result


def _attribute_per_call(result: dict[str, Any], scopes: list[dict[str, Any]], main_scope: str | None,
                        diagnostics: list[str]) -> None:
    main_ns: list[float] = []
    non_main_ns: list[float] = []
    total_ns: list[float] = []
    call_ns: list[float] = []
    wrapper_ns: list[float] = []
    for scope in scopes:
        kernels = _kernels_under(scope)
        main, non_main = _split_ns(kernels, main_scope)
        main_ns.append(main)
        non_main_ns.append(non_main)
        total_ns.append(main + non_main)
        cpu = (scope.get("metrics") or {}).get(CPU_TIME_NS)
        if isinstance(cpu, (int, float)):
            call_ns.append(float(cpu))
            wrapper_ns.append(float(cpu) - (main + non_main))
    result["calls"] = len(scopes)
    known_main = main_scope is not None and any(_name(k) == main_scope for s in scopes for k in _kernels_under(s))
    result["main_kernel_us"] = _median_us(main_ns) if known_main else None
    result["non_main_kernel_us"] = _median_us(non_main_ns) if main_scope is not None else None
    result["total_kernel_us"] = _median_us(total_ns)
    if len(call_ns) == len(scopes):
        result["call_us"] = _median_us(call_ns)
        result["wrapper_us"] = _median_us(wrapper_ns)
        if result["wrapper_us"] is not None and result["wrapper_us"] < 0:
            diagnostics.append("wrapper_us is negative (kernel time exceeds the call's wall time): host and "
                               "device clocks disagree; treat the split as unreliable")
    else:
        diagnostics.append(f"call scopes lack {CPU_TIME_NS!r}: wrapper_us is not measurable and is null")


def _device_summary(device_info: dict[str, Any]) -> dict[str, Any] | None:
    for backend, devices in device_info.items():
        if isinstance(devices, dict) and devices:
            first = next(iter(devices.values()))
            if isinstance(first, dict):
                return {"backend": backend, "arch": first.get("arch"), "num_sms": first.get("num_sms")}
    return None


# ---- instrumentation trace (diagnostic only) ----------------------------------------------------------


def summarize_chrome_trace(payload_or_path: Any, *, max_scopes: int = 64) -> dict[str, Any]:
    """Count and total the complete (`ph == "X"`) events of a Proton instrumentation trace, per scope name.

    Durations are in the trace's own unit (cycles for `metric_type="cycle"`); they are diagnostic only.
    An empty file is what Proton leaves for a kernel without scope markers (seen on the H200 with the
    unmarked example kernels): that is said plainly rather than as a JSON error.
    """
    if isinstance(payload_or_path, (str, Path)) and Path(payload_or_path).stat().st_size == 0:
        raise ValueError("Proton wrote an empty trace: the kernel has no proton.language scope markers "
                         "(pl.scope / pl.enter_scope / pl.exit_scope), so there was nothing to record")
    data = _load(payload_or_path)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data if isinstance(data, list) else []
    scopes: dict[str, dict[str, float]] = {}
    warps: set[str] = set()
    complete = 0
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        complete += 1
        warps.add(f"{event.get('pid')}|{event.get('tid')}")
        entry = scopes.setdefault(str(event.get("name")), {"count": 0, "total": 0.0, "max": 0.0})
        duration = float(event.get("dur") or 0.0)
        entry["count"] += 1
        entry["total"] += duration
        entry["max"] = max(entry["max"], duration)
    ordered = sorted(scopes.items(), key=lambda item: -item[1]["total"])[:max_scopes]
    return {"events": complete, "lanes": len(warps),
            "scopes": [{"name": name, "count": int(v["count"]), "total": v["total"], "max": v["max"]}
                       for name, v in ordered]}
