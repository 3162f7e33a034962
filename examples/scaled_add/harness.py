"""Frozen harness for examples/scaled_add (docs/harness.md, worked example a): scalar arguments.

The scalars are drawn with the tensor from the seed the orchestrator sends with every command, so every
verify trial and every benchmark gets a different `alpha` and `beta`: a candidate that hard-codes them, or
ignores one, fails verify. They reach the entry point as Python floats, exactly as a caller passes them;
fixed values from the case parameters would let a candidate bake them in.
"""

from __future__ import annotations

from typing import Any

import torch

from sandbox_worker.harness_kit import checks, entry_point

ENTRY_POINT = "scaled_add"
KERNEL_NAME = "scaled_add_kernel"
SIGNATURE = "(x, alpha, beta)"


def _inputs(case: dict[str, Any], device: str, salt: int) -> tuple[torch.Tensor, float, float]:
    n = int(case["parameters"]["n"])
    generator = checks.make_generator(device, salt=salt)
    x = checks.random_tensor((n,), torch.float32, device, generator)
    # alpha in [0.5, 2): never near 0, so the output always spans a range a constant cannot match
    scalars = checks.random_tensor((2,), torch.float64, device, generator)
    alpha = 1.25 + 0.75 * float(scalars[0])
    beta = float(scalars[1])
    return x, alpha, beta


def reference(x: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    return alpha * x + beta


def _work(case: dict[str, Any]) -> dict[str, float]:
    n = int(case["parameters"]["n"])
    return {"bytes": 8.0 * n, "flops": 2.0 * n}  # read x, write out (fp32); one multiply, one add


# Verify and benchmark through the judge (sandbox_worker/judged/): on the CPU interpreter the candidate runs
# in its own process and every check and the clock stay here; on a GPU the functions below are used.
JUDGE = entry_point.JudgedEntry(entry=ENTRY_POINT, kernel_name=KERNEL_NAME, signature=SIGNATURE, make_inputs=_inputs,
                                reference=reference, work=_work)


def build(kernel_source: str, target: dict[str, Any]) -> dict[str, Any]:
    return entry_point.build_entry(kernel_source, target, entry=ENTRY_POINT, kernel_name=KERNEL_NAME,
                                   signature=SIGNATURE)


def verify(artifact: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    return entry_point.verify_entry(artifact, case, _inputs, reference)


def benchmark(artifact: dict[str, Any], case: dict[str, Any], repetitions: int) -> dict[str, Any]:
    return entry_point.benchmark_entry(artifact, case, repetitions, _inputs, reference, work=_work(case))


def run_case(artifact: dict[str, Any], case: dict[str, Any]) -> Any:
    """One launch on inputs cached per (case, seed): what Proton times and the NCU replay child calls."""
    return entry_point.run_entry_case(artifact, case, _inputs)


def profile(artifact: dict[str, Any], case: dict[str, Any], request: dict[str, Any] | None = None) -> dict[str, Any]:
    return entry_point.profile_entry(artifact, case, request, lambda: run_case(artifact, case), __file__)
