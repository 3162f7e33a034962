"""Frozen harness for examples/vector_add: build, verify, benchmark, profile.

Inputs come from the seed the orchestrator sends with every command, outputs are poisoned before each
call, and the result of the last timed call is re-checked, so a candidate cannot memoize or skip work.
"""

from __future__ import annotations

from typing import Any

import torch

from sandbox_worker.harness_kit import checks, context, timing
from sandbox_worker.harness_kit.loader import load_kernel_module

ENTRY_POINT = "vector_add"
KERNEL_NAME = "add_kernel"
PROFILE_SALT = 202


def _device(target: dict[str, Any]) -> str:
    return "cuda" if target.get("backend") in ("cuda", "nvidia") and torch.cuda.is_available() else "cpu"


def build(kernel_source: str, target: dict[str, Any]) -> dict[str, Any]:
    try:
        module = load_kernel_module(kernel_source)
    except Exception as exc:  # noqa: BLE001 - any import-time error is a failed build
        return {"success": False, "diagnostics": f"{type(exc).__name__}: {exc}"}
    function = getattr(module, ENTRY_POINT, None)
    if not callable(function):
        return {"success": False, "diagnostics": f"kernel does not export {ENTRY_POINT}(x, y)"}
    return {"success": True, "artifact": {"fn": function, "device": _device(target), "kernel_name": KERNEL_NAME,
                                          "main_scope": target.get("main_scope") or KERNEL_NAME,
                                          "source": kernel_source, "target": target, "inputs": {}}}


def _inputs(case: dict[str, Any], device: str, salt: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = int(case["parameters"]["n"])
    generator = checks.make_generator(device, salt=salt)
    x = checks.random_tensor((n,), torch.float32, device, generator)
    y = checks.random_tensor((n,), torch.float32, device, generator)
    return x, y


def verify(artifact: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    device = artifact["device"]
    return checks.verify_call(
        artifact["fn"],
        lambda x, y: x + y,
        lambda salt: _inputs(case, device, salt),
    )


def benchmark(artifact: dict[str, Any], case: dict[str, Any], repetitions: int) -> dict[str, Any]:
    device = artifact["device"]
    x, y = _inputs(case, device, salt=101)
    expected = x + y

    def check_last(output: torch.Tensor) -> None:
        verdict = checks.compare(output, expected, inputs=(x, y))
        if not verdict["passed"]:
            raise AssertionError(f"output of the last timed call is wrong: {verdict['diagnostics']}")

    budget = float(case["parameters"].get("budget_seconds", 2.0))
    result = timing.measure(lambda: artifact["fn"](x, y), repetitions=repetitions, device=device,
                            budget_seconds=budget, check_last=check_last)
    result["metrics"].update({"bytes": 12.0 * x.numel(), "flops": 1.0 * x.numel()})  # read x and y, write out
    return result


def run_case(artifact: dict[str, Any], case: dict[str, Any]) -> torch.Tensor:
    """Launch the case once on inputs drawn once per (case, seed): what Proton times and ncu replays
    (`ncu_replay` rebuilds the artifact in a child process and calls this with the same seed)."""
    key = (str(case.get("case_id")), context.evaluation_seed())
    cache = artifact["inputs"]
    if key not in cache:
        cache.clear()
        cache[key] = _inputs(case, artifact["device"], salt=PROFILE_SALT)
    return artifact["fn"](*cache[key])


def profile(artifact: dict[str, Any], case: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    from sandbox_worker.harness_kit.profile_kit import profile_with_kit

    return profile_with_kit(
        lambda: run_case(artifact, case), request=request, case=case, kernel_name=artifact["kernel_name"],
        main_scope=artifact["main_scope"],
        ncu_replay={"harness_path": __file__, "kernel_source": artifact["source"], "target": artifact["target"],
                    "entry": "run_case"})
