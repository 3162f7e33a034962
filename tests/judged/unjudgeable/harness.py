"""A vector_add harness the judge cannot take: the entry gets a dict of options besides its tensors.

The judge passes tensors and plain values through its shared slots, not dicts, so under `verdict_process:
"auto"` the untouched kernel fails there and the run falls back to the candidate's process
(orchestrator/worker/verdict_fallback.py). Otherwise the example's harness.

Inputs come from the seed the orchestrator sends with every command, outputs are poisoned before each
call, and the result of the last timed call is re-checked, so a candidate cannot memoize or skip work.
"""

from __future__ import annotations

from typing import Any

import torch

from sandbox_worker.harness_kit import checks, entry_point

ENTRY_POINT = "vector_add"
KERNEL_NAME = "add_kernel"
SIGNATURE = "(x, y, options)"


def _inputs(case: dict[str, Any], device: str, salt: int) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    n = int(case["parameters"]["n"])
    generator = checks.make_generator(device, salt=salt)
    x = checks.random_tensor((n,), torch.float32, device, generator)
    y = checks.random_tensor((n,), torch.float32, device, generator)
    return x, y, {"alpha": 1.0}


def reference(x: torch.Tensor, y: torch.Tensor, options: dict[str, float]) -> torch.Tensor:
    return x + options["alpha"] * y


def _work(case: dict[str, Any]) -> dict[str, float]:
    n = int(case["parameters"]["n"])
    return {"bytes": 12.0 * n, "flops": 1.0 * n}  # read x and y, write out (fp32)


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
