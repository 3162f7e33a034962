"""Frozen harness for examples/vector_add: build, verify, benchmark, profile.

Inputs come from the seed the orchestrator sends with every command, outputs are poisoned before each
call, and the result of the last timed call is re-checked, so a candidate cannot memoize or skip work.
"""

from __future__ import annotations

from typing import Any

import torch

from sandbox_worker.harness_kit import checks, timing
from sandbox_worker.harness_kit.loader import load_kernel_module

ENTRY_POINT = "vector_add"


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
    return {"success": True, "artifact": {"fn": function, "device": _device(target),
                                          "kernel_name": "add_kernel"}}


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
    return timing.measure(lambda: artifact["fn"](x, y), repetitions=repetitions, device=device,
                          budget_seconds=budget, check_last=check_last)


def profile(artifact: dict[str, Any], case: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    from sandbox_worker.harness_kit.profile_kit import profile_with_kit

    device = artifact["device"]
    x, y = _inputs(case, device, salt=202)
    return profile_with_kit(lambda: artifact["fn"](x, y), request=request, case=case,
                            kernel_name=artifact["kernel_name"], main_scope="add_kernel", ncu_replay=None)
