"""Builders for provider tests: real protocol models, example kernels, contexts and history records."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.providers.base import ProposalContext
from protocol.bundle import Case, Target
from protocol.results import (
    CandidateMetadata,
    CaseComparison,
    CaseMeasurement,
    Decision,
    DecisionStatus,
    Evaluation,
    EvaluationStatus,
    ExperimentRecord,
    SampleStats,
)

VECTOR_ADD = '''\
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)

def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE)
    return out
'''

MATMUL = '''\
import torch
import triton
import triton.language as tl

GROUP_M = 8


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)  # noqa: E731
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=GROUP_M, num_warps=4,
                        num_stages=3)
    return c
'''

CASES = (Case(case_id="small", parameters={"n": 4096}), Case(case_id="large", parameters={"n": 1 << 20}, weight=2.0))


def stats(median: float, cv: float = 0.02, n: int = 10) -> SampleStats:
    return SampleStats(n=n, median=median, p95=median * 1.05, mean=median, stdev=median * cv, cv=cv,
                       min=median * 0.97, max=median * 1.08)


def evaluation(label: str, medians: dict[str, float], profiles: dict[str, dict[str, Any]] | None = None,
               status: EvaluationStatus = EvaluationStatus.OK, reason: str = "") -> Evaluation:
    profiles = profiles or {}
    return Evaluation(
        label=label,
        status=status,
        reason=reason,
        cases=[
            CaseMeasurement(case_id=case_id, protected=True, weight=1.0, correct=True, stats=stats(median),
                            samples_us=[median] * 10, profile=profiles.get(case_id))
            for case_id, median in medians.items()
        ],
    )


def record(experiment_id: str, *, status: DecisionStatus = DecisionStatus.REJECTED, speedup: float | None = 0.9,
           hypothesis: str = "", change: str = "", reason: str = "slower than the incumbent",
           source: str = "", normalized: str = "", comparisons: list[CaseComparison] | None = None,
           evaluations: list[Evaluation] | None = None, source_path: str = "") -> ExperimentRecord:
    return ExperimentRecord(
        experiment_id=experiment_id,
        source_sha256=source,
        normalized_sha256=normalized,
        source_path=source_path,
        metadata=CandidateMetadata(hypothesis=hypothesis, evidence="median 1 us", change=change,
                                   expected_effect="faster", risk="none"),
        evaluations=evaluations or [],
        comparisons=comparisons or [],
        aggregate_speedup=speedup,
        decision=Decision(status=status, reason=reason),
    )


def context(source: str = VECTOR_ADD, *, incumbent: Evaluation | None = None, baseline: Evaluation | None = None,
            history: tuple[ExperimentRecord, ...] = (), excluded: frozenset[str] = frozenset(),
            round_index: int = 1, slot_index: int = 0, guidance: str = "", **extra: Any) -> ProposalContext:
    if incumbent is None:
        incumbent = evaluation("incumbent", {"small": 812.5, "large": 4210.0})
    return ProposalContext(
        experiment_id=f"r{round_index:03d}-c{slot_index:03d}",
        round_index=round_index,
        slot_index=slot_index,
        kernel_name="add_kernel",
        incumbent_id="baseline",
        incumbent_source=source,
        incumbent_evaluation=incumbent,
        baseline_evaluation=baseline if baseline is not None else incumbent,
        cases=CASES,
        target=Target(backend="cuda", architecture="sm_90", device="NVIDIA H200", optimization_guidance=guidance,
                      environment={"SECRET_ENV_IN_TARGET": "target-env-value-should-not-appear"}),
        history=history,
        excluded_digests=excluded,
        **extra,
    )


@pytest.fixture
def vector_add_source() -> str:
    return VECTOR_ADD
