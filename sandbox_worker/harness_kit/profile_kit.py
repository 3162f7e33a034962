"""`profile_with_kit`: the one call a harness's `profile(artifact, case, request)` needs.

It reads the structured request (level, tools, artifacts_dir, ...), runs Proton launch attribution
in-process, NCU in a replay child, and diagnostic-only instrumentation when asked, and returns compact
normalised JSON:

    {"level", "tools", "scope": {experiment_id, case_id, kernel}, "proton": {...} | None,
     "ncu": {...} | None, "instrumentation": {...} | None, "diagnostics": [...], "artifacts": {...}}

A tool that was not requested is None; a requested tool that cannot run is `{"available": false, ...}`
with null metrics and a diagnostic (never 0). On a CPU-only machine every tool is unavailable, decided
without starting any child process. Typical harness use:

    def profile(artifact, case, request=None):
        return profile_with_kit(lambda: run_case(artifact, case), request=request or {}, case=case,
                                kernel_name="add_kernel", main_scope="add_kernel",
                                ncu_replay={"harness_path": __file__, "kernel_source": artifact.source,
                                            "target": artifact.target, "entry": "run_case"})
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox_worker.harness_kit import ncu, proton
from sandbox_worker.harness_kit.context import evaluation_seed, scratch_dir
from sandbox_worker.harness_kit.device import cuda_unavailable_reason

DEFAULT_TOOLS = ("proton_launch", "native_profiler")
KNOWN_TOOLS = ("proton_launch", "native_profiler", "ncu", "proton_intra_kernel")
REPLAY_KEYS = ("harness_path", "kernel_path", "kernel_source", "target", "entry", "warmup_calls",
               "profiled_calls", "gate", "timeout_s", "kernel_regex")
# a replay child of another module (the judge's `sandbox_worker.judged.ncu_child`) and the keys it reads
MODULE_REPLAY_KEYS = ("module", "harness_path", "record_path", "kernels_dir", "triton_cache_dir", "kernels", "target",
                      "warmup_calls", "profiled_calls", "gate", "timeout_s", "kernel_regex")


def safe_case_id(case_id: str) -> str:
    """A directory-safe case id: runs outside `[A-Za-z0-9._-]` become `-`, and an id that changed or is
    over 96 characters gets 8 hex digits of its SHA-1, so distinct case ids keep distinct directories."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", case_id) or "case"
    if safe != case_id or len(safe) > 96:
        safe = f"{safe[:80]}-{hashlib.sha1(case_id.encode()).hexdigest()[:8]}"
    return safe


def resolve_tools(tools: list[str], cuda_ready: bool) -> tuple[list[str], list[str]]:
    """Deduplicate, map an unresolved `native_profiler` to ncu (the orchestrator normally did this)."""
    resolved: list[str] = []
    diagnostics: list[str] = []
    for tool in tools:
        if tool not in KNOWN_TOOLS:
            diagnostics.append(f"unknown profile tool {tool!r} ignored")
            continue
        if tool == "native_profiler":
            tool = "ncu"
            if not cuda_ready:
                diagnostics.append("native_profiler maps to ncu only on an NVIDIA CUDA device")
        if tool not in resolved:
            resolved.append(tool)
    return resolved, diagnostics


def build_replay_spec(ncu_replay: dict[str, Any], *, case: dict[str, Any], seed: int | None,
                      artifacts_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The `ncu_replay` spec from the harness's description, or (None, why not).

    `kernel_source` (the candidate source the harness was built from) is written next to the other
    artifacts, so the replay child builds exactly what was verified and benchmarked.
    """
    if "module" in ncu_replay:
        return _module_replay_spec(ncu_replay, case=case, seed=seed)
    unknown = sorted(set(ncu_replay) - set(REPLAY_KEYS))
    if unknown:
        return None, f"ncu_replay has unknown keys {unknown}; expected some of {list(REPLAY_KEYS)}"
    harness_path = ncu_replay.get("harness_path")
    if not harness_path or not Path(harness_path).is_file():
        return None, f"ncu_replay harness_path is missing or not a file: {harness_path!r}"
    kernel_path = ncu_replay.get("kernel_path")
    if ncu_replay.get("kernel_source") is not None:
        written = artifacts_dir / "ncu_replay_kernel.py"
        written.write_text(str(ncu_replay["kernel_source"]), encoding="utf-8")
        kernel_path = str(written)
    if not kernel_path or not Path(kernel_path).is_file():
        return None, "ncu_replay needs kernel_source or an existing kernel_path"
    spec = {
        "harness_path": str(Path(harness_path).resolve()),
        "kernel_path": str(Path(kernel_path).resolve()),
        "target": ncu_replay.get("target") or {},
        "case": case,
        "seed": seed,
        "entry": ncu_replay.get("entry") or "run_case",
        "warmup_calls": int(ncu_replay.get("warmup_calls", 3)),
        "profiled_calls": int(ncu_replay.get("profiled_calls", 1)),
        "gate": ncu_replay.get("gate", "cuda_profiler_api"),
    }
    return spec, None


def _module_replay_spec(ncu_replay: dict[str, Any], *, case: dict[str, Any],
                        seed: int | None) -> tuple[dict[str, Any] | None, str | None]:
    """The spec of a replay child of its own module: its keys pass through, with the case and the seed."""
    unknown = sorted(set(ncu_replay) - set(MODULE_REPLAY_KEYS))
    if unknown:
        return None, f"ncu_replay has unknown keys {unknown}; expected some of {list(MODULE_REPLAY_KEYS)}"
    harness_path = ncu_replay.get("harness_path")
    if not harness_path or not Path(harness_path).is_file():
        return None, f"ncu_replay harness_path is missing or not a file: {harness_path!r}"
    spec = {key: value for key, value in ncu_replay.items() if key not in ("timeout_s", "kernel_regex")}
    spec.update({"harness_path": str(Path(harness_path).resolve()), "case": case, "seed": seed,
                 "warmup_calls": int(ncu_replay.get("warmup_calls", 3)),
                 "profiled_calls": int(ncu_replay.get("profiled_calls", 1)),
                 "gate": ncu_replay.get("gate", "cuda_profiler_api")})
    return spec, None


def _current_seed() -> int | None:
    try:
        return evaluation_seed()
    except RuntimeError:
        return None


def _prefixed(tool: str, diagnostics: list[str]) -> list[str]:
    return [f"{tool}: {line}" for line in diagnostics]


def profile_with_kit(
    run_case: Callable[[], Any],
    *,
    request: dict[str, Any] | None,
    case: dict[str, Any],
    kernel_name: str | None,
    main_scope: str | None,
    ncu_replay: dict[str, Any] | None,
    instrumented_case: Callable[[], Any] | None = None,
    proton_iterations: int = 10,
    ncu_timeout_s: float = 300.0,
    prepare: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Answer one structured profile request for one case; see the module docstring for the shape.

    `run_case` launches the case once (already built and verified). `kernel_name` is the exact name
    ncu filters on (defaults to `main_scope`); `main_scope` is the kernel Proton treats as the main
    launch. `ncu_replay` tells the replay child how to rebuild and launch the case (keys: harness_path,
    kernel_source or kernel_path, target, entry, warmup_calls, profiled_calls, gate, timeout_s,
    kernel_regex; `module` names another replay child, e.g. the judge's `sandbox_worker.judged.ncu_child`, whose
    own keys pass through). `instrumented_case` is the diagnostic-only call for `proton_intra_kernel`.
    `prepare` runs before every Proton call, outside its scope (`proton.collect_launch_attribution`).
    """
    request = dict(request or {})
    level = request.get("level") or "summary"
    if level not in ncu.LEVELS:
        raise ValueError(f"profile request level must be one of {ncu.LEVELS}, got {level!r}")
    case_id = str(case.get("case_id", "case"))
    artifacts_dir = Path(request.get("artifacts_dir") or scratch_dir() / "profile_artifacts" / safe_case_id(case_id))
    if not artifacts_dir.is_absolute():
        raise ValueError("profile request artifacts_dir must be an absolute path")
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    kernel = kernel_name or main_scope
    cuda_reason = cuda_unavailable_reason()
    tools, diagnostics = resolve_tools(list(request.get("tools") or DEFAULT_TOOLS), cuda_reason is None)
    result: dict[str, Any] = {
        "level": level,
        "tools": tools,
        "scope": {"experiment_id": request.get("experiment_id"), "case_id": case_id, "kernel": kernel},
        "proton": None,
        "ncu": None,
        "instrumentation": None,
        "diagnostics": diagnostics,
        "artifacts": {"artifacts_dir": str(artifacts_dir)},
    }

    if "proton_launch" in tools:
        if cuda_reason is not None:
            attribution = proton.unavailable_attribution([cuda_reason], main_scope=main_scope)
        else:
            attribution = proton.collect_launch_attribution(
                run_case, artifacts_dir=str(artifacts_dir), main_scope=main_scope, iterations=proton_iterations,
                prepare=prepare)
        result["proton"] = attribution

    if "ncu" in tools:
        result["ncu"] = _ncu(level, kernel, ncu_replay, case, artifacts_dir, cuda_reason, ncu_timeout_s)

    if "proton_intra_kernel" in tools:
        if not request.get("diagnostic_only"):
            diagnostics.append("proton_intra_kernel skipped: the request is not diagnostic_only")
        elif cuda_reason is not None:
            result["instrumentation"] = {"diagnostic_only": True, "available": False, "diagnostics": [cuda_reason],
                                         "artifacts": {}}
        else:
            result["instrumentation"] = proton.collect_instrumentation_trace(
                instrumented_case or run_case, artifacts_dir=str(artifacts_dir),
                granularity=request.get("granularity") or "warp")

    for key in ("proton", "ncu", "instrumentation"):
        section = result[key]
        if section is None:
            continue
        result["diagnostics"] += _prefixed(key, section.get("diagnostics", []))
        result["artifacts"].update(section.get("artifacts", {}))
    return result


def _ncu(level: str, kernel: str | None, ncu_replay: dict[str, Any] | None, case: dict[str, Any],
         artifacts_dir: Path, cuda_reason: str | None, timeout_s: float) -> dict[str, Any]:
    if cuda_reason is not None:
        return ncu.unavailable_ncu(level, [cuda_reason], kernel=kernel)
    if not kernel:
        return ncu.unavailable_ncu(level, ["no kernel_name or main_scope: ncu needs the main kernel's name to "
                                           "filter on"])
    if ncu_replay is None:
        return ncu.unavailable_ncu(level, ["the harness gave no ncu_replay description: ncu needs a replay child "
                                           "to profile"], kernel=kernel)
    spec, problem = build_replay_spec(ncu_replay, case=case, seed=_current_seed(), artifacts_dir=artifacts_dir)
    if spec is None:
        return ncu.unavailable_ncu(level, [problem or "invalid ncu_replay"], kernel=kernel)
    return ncu.collect_ncu_profile(
        kernel_name=kernel, level=level, artifacts_dir=str(artifacts_dir), replay_spec=spec,
        kernel_regex=ncu_replay.get("kernel_regex"), timeout_s=float(ncu_replay.get("timeout_s", timeout_s)))
