"""Frozen harness for examples/gemm (docs/harness.md, worked example b): `c = a @ b` in fp32.

M, N and K come from each case's parameters, so one bundle covers square, tall, wide and ragged
shapes. Inputs are fp32 in [-1, 1) drawn from the seed the orchestrator sends with every command. The
reference is `torch.matmul` on fp64 copies, rounded once to fp32, so no TF32 or reduced-precision
setting a candidate could flip applies to it.
"""

from __future__ import annotations

from typing import Any

import torch

from sandbox_worker.harness_kit import checks, entry_point

ENTRY_POINT = "gemm"
KERNEL_NAME = "gemm_kernel"
SIGNATURE = "(a, b)"
# fp32 in, fp32 accumulation: |c - reference| <= 1e-4 * max|reference| + 1e-4 * |reference| elementwise.
# Measured in the interpreter on these cases: the fp32 kernel's worst error is about 1e-6, some 600x inside
# that bound; inputs rounded to TF32 or fp16 (a 10-bit mantissa: what tl.dot does to fp32 on a GPU by
# default) err by about 3e-4 of max|c|, three times outside it. With inputs uniform in [-1, 1), both errors
# and max|c| grow about as sqrt(K), so the bound keeps its place for larger K.
COMPARE = {"base": (1e-4, 1e-4), "require_contiguous": True}


def _shape(case: dict[str, Any]) -> tuple[int, int, int]:
    parameters = case["parameters"]
    return int(parameters["m"]), int(parameters["n"]), int(parameters["k"])


def _inputs(case: dict[str, Any], device: str, salt: int) -> tuple[torch.Tensor, torch.Tensor]:
    m, n, k = _shape(case)
    generator = checks.make_generator(device, salt=salt)
    a = checks.random_tensor((m, k), torch.float32, device, generator)
    b = checks.random_tensor((k, n), torch.float32, device, generator)
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a.double(), b.double()).to(torch.float32)


def _work(case: dict[str, Any]) -> dict[str, float]:
    m, n, k = _shape(case)
    return {"bytes": 4.0 * (m * k + k * n + m * n), "flops": 2.0 * m * n * k}  # fp32 in and out, once each


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
