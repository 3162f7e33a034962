"""Triton Proton for harness authors: launch attribution (hatchet) and diagnostic-only instrumentation.

Triton 3.6 has no in-memory Proton API: a session is `proton.start(path, ...)` ... `proton.finalize()`
and the data is read back from `path.hatchet` (tree) or `path.chrome_trace` (trace). Triton is imported
lazily so the worker stays importable without it.

Launch attribution (`collect_launch_attribution`): the function is called `iterations` times, each call
inside its own `proton.cpu_timed_scope("tlx_agent_call_<i>")` that ends after a device synchronize. The
hatchet then holds, per call, the host wall time of the call (`cpu_time (ns)` on the scope node) and the
kernels it launched (leaves with `time (ns)` summed over `count` launches). Every `*_us` figure in the
result is **per call of the profiled function** (the median over calls):

- `main_kernel_us`: GPU time of launches whose name equals `main_scope` exactly;
- `non_main_kernel_us`: GPU time of every other kernel the call launched;
- `wrapper_us`: call wall time minus all its kernel time: the Python wrapper, argument handling, launch
  latency, gaps between kernels and the final synchronize (Proton's own per-launch cost included). It is
  null, with a diagnostic, when the tree has no CPU-timed call scope; never 0 for "unknown".

Main-kernel time and a benchmark's endpoint time cover different scopes; nothing here subtracts one
from the other. This module runs the Proton sessions; reading their output files is `proton_parse`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox_worker.harness_kit.device import cuda_unavailable_reason
from sandbox_worker.harness_kit.proton_parse import (
    CALL_SCOPE_PREFIX,
    CPU_TIME_NS,
    TIME_NS,
    parse_hatchet,
    summarize_chrome_trace,
    unavailable_attribution,
)

SUPPORTED_GRANULARITY = "warp"
MAX_TRACE_BYTES = 64 * 1024 * 1024  # a larger trace stays an artifact; parsing it would swamp the worker


# ---- availability -------------------------------------------------------------------------------------


def proton_unavailable_reason() -> str | None:
    """Why Proton cannot profile here (None when it can). Cheap on CPU-only machines."""
    reason = cuda_unavailable_reason()
    if reason is not None:
        return f"{reason}; Proton needs a GPU"
    try:
        import triton.profiler  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - missing libproton, wrong build
        return f"triton.profiler (Proton) is not importable: {type(exc).__name__}: {exc}"
    return None


def _synchronize() -> None:
    import torch

    torch.cuda.synchronize()


# ---- collection (GPU) ---------------------------------------------------------------------------------


def collect_launch_attribution(
    fn: Callable[[], Any],
    *,
    artifacts_dir: str,
    name: str = "proton_launch",
    main_scope: str | None = None,
    iterations: int = 10,
    warmup_calls: int = 2,
    prepare: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Run `fn` under a Proton session (`hook="triton"`) and attribute its time per call.

    Warm-up calls (compilation, autotuning) run before the session. `prepare`, when given, runs before every
    call, outside its scope and with the session paused (a judge draws fresh inputs, poisons and flushes
    there, as it does before a timed call). The `.hatchet` and a commands file are written to `artifacts_dir`
    and returned by absolute path. Missing Proton or no GPU gives `{"available": false, ...}` with nulls and a
    diagnostic.
    """
    if iterations < 1:
        raise ValueError("iterations must be >= 1")
    reason = proton_unavailable_reason()
    if reason is not None:
        return unavailable_attribution([reason], main_scope=main_scope)
    directory = Path(artifacts_dir)
    directory.mkdir(parents=True, exist_ok=True)
    base = directory / name
    hatchet_path = directory / f"{name}.hatchet"
    hatchet_path.unlink(missing_ok=True)
    commands_path = directory / f"{name}_commands.json"
    commands_path.write_text(json.dumps({
        "proton.start": {"name": str(base), "hook": "triton", "context": "shadow", "data": "tree"},
        "per_call_scope": f"proton.cpu_timed_scope('{CALL_SCOPE_PREFIX}<i>') around fn() + torch.cuda.synchronize()",
        "iterations": iterations, "warmup_calls": warmup_calls, "main_scope": main_scope,
        "proton.finalize": {}, "units": "microseconds per call of fn (median over calls)",
    }, indent=2), encoding="utf-8")
    artifacts = {"proton_commands": str(commands_path)}

    import triton.profiler as proton

    try:
        for _ in range(warmup_calls):
            if prepare is not None:
                prepare()
            fn()
        _synchronize()
    except Exception as exc:  # noqa: BLE001 - report, do not crash the profile of other tools
        return {**unavailable_attribution([f"warm-up call raised {type(exc).__name__}: {exc}"], main_scope=main_scope),
                "artifacts": artifacts}
    started = time.monotonic()
    session = None
    error: str | None = None
    try:
        session = proton.start(str(base), hook="triton")
        if session is None:
            error = "proton.start returned no session (TRITON_PROTON_DISABLE set or run under the proton CLI)"
        else:
            for index in range(iterations):
                if prepare is not None:
                    _paused(proton, session, prepare)
                with proton.cpu_timed_scope(f"{CALL_SCOPE_PREFIX}{index}"):
                    fn()
                    _synchronize()
    except Exception as exc:  # noqa: BLE001
        error = f"profiled call raised {type(exc).__name__}: {exc}"
    finally:
        if session is not None:
            try:
                proton.finalize()
            except Exception as exc:  # noqa: BLE001
                error = error or f"proton.finalize raised {type(exc).__name__}: {exc}"
    if error is not None:
        return {**unavailable_attribution([error], main_scope=main_scope), "artifacts": artifacts}
    if not hatchet_path.is_file():
        return {**unavailable_attribution([f"Proton wrote no hatchet at {hatchet_path}"], main_scope=main_scope),
                "artifacts": artifacts}
    artifacts["proton_hatchet"] = str(hatchet_path)
    result = parse_hatchet(hatchet_path, main_scope, calls=iterations)
    result["artifacts"] = artifacts
    result["collect_seconds"] = round(time.monotonic() - started, 3)
    return result



def _paused(proton: Any, session: Any, prepare: Callable[[], Any]) -> None:
    """`prepare()` with the session deactivated, so its kernels are not profiled (where this Proton can pause
    a session; elsewhere they land outside every call scope, which the per-call figures ignore)."""
    deactivate, activate = getattr(proton, "deactivate", None), getattr(proton, "activate", None)
    paused = False
    if deactivate is not None and activate is not None:
        try:
            deactivate(session)
            paused = True
        except Exception:  # noqa: BLE001 - an older Proton: profile the preparation outside the scopes
            paused = False
    try:
        prepare()
        _synchronize()
    finally:
        if paused:
            activate(session)


# ---- instrumentation (diagnostic only) ----------------------------------------------------------------


def collect_instrumentation_trace(
    fn: Callable[[], Any],
    *,
    artifacts_dir: str,
    name: str = "proton_instrumentation",
    granularity: str = "warp",
    metric_type: str = "cycle",
) -> dict[str, Any]:
    """Run `fn` once under Proton's instrumentation backend (`data="trace"`, warp granularity).

    The kernel must carry `pl.scope`/`pl.enter_scope` markers; Triton semantic is enabled explicitly
    before the call so they compile. The result is **diagnostic only**: instrumented code and its timing
    are never benchmarked, promoted, committed or compared with uninstrumented samples. `warp_group`
    granularity is rejected (the runtime rejects it today).
    """
    if granularity != SUPPORTED_GRANULARITY:
        raise ValueError(f"granularity {granularity!r} is not supported; only 'warp' (warp_group is rejected "
                         "by the runtime today)")
    base_result: dict[str, Any] = {"diagnostic_only": True, "available": False, "granularity": granularity,
                                   "metric_type": metric_type, "events": None, "lanes": None, "scopes": [],
                                   "diagnostics": [], "artifacts": {}}
    reason = proton_unavailable_reason()
    if reason is not None:
        base_result["diagnostics"].append(reason)
        return base_result
    directory = Path(artifacts_dir)
    directory.mkdir(parents=True, exist_ok=True)
    base = directory / name
    trace_path = directory / f"{name}.chrome_trace"
    trace_path.unlink(missing_ok=True)

    import triton.profiler as proton
    import triton.profiler.language as pl

    pl.enable_semantic("triton")
    mode_cls = getattr(getattr(proton, "mode", None), "Default", None)
    mode: Any = (mode_cls(metric_type=metric_type, granularity=granularity) if mode_cls is not None
                 else f"default:metric_type={metric_type}:granularity={granularity}")
    commands_path = directory / f"{name}_commands.json"
    commands_path.write_text(json.dumps({
        "proton.language.enable_semantic": "triton",
        "proton.start": {"name": str(base), "backend": "instrumentation", "data": "trace", "mode": str(mode)},
        "calls": 1, "proton.finalize": {}, "diagnostic_only": True,
    }, indent=2), encoding="utf-8")
    base_result["artifacts"]["proton_instrumentation_commands"] = str(commands_path)
    session = None
    try:
        session = proton.start(str(base), backend="instrumentation", data="trace", mode=mode)
        if session is None:
            base_result["diagnostics"].append("proton.start returned no session (profiling disabled)")
            return base_result
        fn()
        _synchronize()
    except Exception as exc:  # noqa: BLE001
        base_result["diagnostics"].append(f"instrumented call raised {type(exc).__name__}: {exc}")
        return base_result
    finally:
        if session is not None:
            try:
                proton.finalize()
            except Exception as exc:  # noqa: BLE001
                base_result["diagnostics"].append(f"proton.finalize raised {type(exc).__name__}: {exc}")
    if not trace_path.is_file():
        base_result["diagnostics"].append(f"Proton wrote no trace at {trace_path}")
        return base_result
    base_result["artifacts"]["proton_chrome_trace"] = str(trace_path)
    size = trace_path.stat().st_size
    if size > MAX_TRACE_BYTES:
        base_result["diagnostics"].append(f"trace is {size} bytes (> {MAX_TRACE_BYTES}): kept as an artifact, "
                                          "not summarised")
        base_result["available"] = True
        return base_result
    try:
        summary = summarize_chrome_trace(trace_path)
    except (OSError, ValueError) as exc:
        base_result["diagnostics"].append(f"trace could not be read: {exc}")
        return base_result
    base_result.update(summary)
    base_result["available"] = True
    if not summary["events"]:
        base_result["diagnostics"].append("trace holds no complete events: the kernel has no pl scopes or was not "
                                          "recompiled with instrumentation")
    return base_result


__all__ = [
    "CALL_SCOPE_PREFIX",
    "CPU_TIME_NS",
    "MAX_TRACE_BYTES",
    "SUPPORTED_GRANULARITY",
    "TIME_NS",
    "collect_instrumentation_trace",
    "collect_launch_attribution",
    "parse_hatchet",
    "proton_unavailable_reason",
    "summarize_chrome_trace",
    "unavailable_attribution",
]
