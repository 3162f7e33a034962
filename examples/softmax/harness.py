"""Frozen harness for examples/softmax: build, verify, benchmark, profile.

Inputs come from the seed the orchestrator sends with every command. Each row gets its own offset,
and the drawn offsets always include +100 and -100, so a kernel that skips the max subtraction
overflows (exp(100) is inf in fp32) or underflows and fails. The result of the last timed call is
re-checked, and outputs are poisoned between timed calls, so a candidate cannot memoize or skip work.
"""

from __future__ import annotations

from typing import Any

import torch

from sandbox_worker.harness_kit import checks, entry_point

ENTRY_POINT = "softmax"
KERNEL_NAME = "softmax_kernel"
ROW_OFFSET = 100.0  # rows are shifted by up to this much: far past exp's fp32 range without the max subtraction
SPREAD = 12.0  # values within a row are uniform in [offset - SPREAD, offset + SPREAD)
SIGNATURE = "(x)"
COMPARE = {"require_contiguous": True}


def _shape(case: dict[str, Any]) -> tuple[int, int]:
    parameters = case["parameters"]
    return int(parameters["m"]), int(parameters["n"])


def _inputs(case: dict[str, Any], device: str, salt: int) -> tuple[torch.Tensor]:
    m, n = _shape(case)
    generator = checks.make_generator(device, salt=salt)
    x = checks.random_tensor((m, n), torch.float32, device, generator, low=-SPREAD, high=SPREAD)
    offsets = checks.random_tensor((m, 1), torch.float32, device, generator, low=-ROW_OFFSET, high=ROW_OFFSET)
    if m >= 2:
        offsets[offsets.argmax()] = ROW_OFFSET
        offsets[offsets.argmin()] = -ROW_OFFSET
    return (x + offsets,)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _work(case: dict[str, Any]) -> dict[str, float]:
    m, n = _shape(case)
    return {"bytes": 2.0 * m * n * 4, "flops": 4.0 * m * n}  # one read, one write; max, exp, sum, scale


# Verify and benchmark through the judge (sandbox_worker/judged/): on the CPU interpreter the candidate runs
# in its own process and every check and the clock stay here; on a GPU the functions below are used.
JUDGE = entry_point.JudgedEntry(entry=ENTRY_POINT, kernel_name=KERNEL_NAME, signature=SIGNATURE, make_inputs=_inputs,
                                reference=reference, work=_work, compare=COMPARE)


def build(kernel_source: str, target: dict[str, Any]) -> dict[str, Any]:
    return entry_point.build_entry(kernel_source, target, entry=ENTRY_POINT, kernel_name=KERNEL_NAME,
                                   signature=SIGNATURE)


def verify(artifact: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    return entry_point.verify_entry(artifact, case, _inputs, reference, **COMPARE)


def benchmark(artifact: dict[str, Any], case: dict[str, Any], repetitions: int) -> dict[str, Any]:
    return entry_point.benchmark_entry(artifact, case, repetitions, _inputs, reference, work=_work(case), **COMPARE)


def run_case(artifact: dict[str, Any], case: dict[str, Any]) -> Any:
    """One launch on inputs cached per (case, seed): what Proton times and the NCU replay child calls."""
    return entry_point.run_entry_case(artifact, case, _inputs)


def profile(artifact: dict[str, Any], case: dict[str, Any], request: dict[str, Any] | None = None) -> dict[str, Any]:
    return entry_point.profile_entry(artifact, case, request, lambda: run_case(artifact, case), __file__)
