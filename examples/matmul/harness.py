"""Frozen harness for examples/matmul: build, verify, benchmark, profile.

Inputs are fp16 in [-1, 1) drawn from the seed the orchestrator sends with every command. The
reference is `torch.matmul` on fp64 copies, rounded to fp16, compared with fp16 tolerances scaled to
the output's magnitude (`checks`). The result of the last timed call is re-checked, and outputs are
poisoned between timed calls, so a candidate cannot memoize or skip work.
"""

from __future__ import annotations

from typing import Any

import torch

from sandbox_worker.harness_kit import checks, entry_point

ENTRY_POINT = "matmul"
KERNEL_NAME = "matmul_kernel"
SIGNATURE = "(a, b)"
COMPARE = {"require_contiguous": True}


def _shape(case: dict[str, Any]) -> tuple[int, int, int]:
    parameters = case["parameters"]
    return int(parameters["m"]), int(parameters["n"]), int(parameters["k"])


def _inputs(case: dict[str, Any], device: str, salt: int) -> tuple[torch.Tensor, torch.Tensor]:
    m, n, k = _shape(case)
    generator = checks.make_generator(device, salt=salt)
    a = checks.random_tensor((m, k), torch.float16, device, generator)
    b = checks.random_tensor((k, n), torch.float16, device, generator)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The product in fp64 (no TF32 or reduced-precision setting a candidate could flip applies), rounded
    once to fp16; the kernel's fp32 accumulation is within fp16 tolerance of it."""
    return torch.matmul(a.double(), b.double()).to(torch.float16)


def _work(case: dict[str, Any]) -> dict[str, Any]:
    m, n, k = _shape(case)
    # fp16 in and out, once each; the multiply-adds on fp16 tensor cores (the report's FLOP peak is that dtype's)
    return {"bytes": 2.0 * (m * k + k * n + m * n), "flops": 2.0 * m * n * k, "flop_dtype": "float16"}


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
