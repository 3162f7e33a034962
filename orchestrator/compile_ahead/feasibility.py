"""Feasible or not, and which resource says so; pruning the configs that can only be worse (pure).

A config is infeasible when its compile for the target named a resource (ptxas out of registers, shared
memory over the limit) or failed outright, or when its compiled figures exceed the device's limits
(orchestrator/compile_ahead/limits.py). When compile ahead could not tell (the file did not import without a
GPU, its kernel's parameters are not the signature's, the compile timed out or crashed, the child could not
isolate itself), the verdict is `unknown` and the config goes to a GPU worker as before: a config is kept off
the GPU only by what its own compile showed.

Pruning: tile sizes and pipeline stages only add shared memory and registers, so a config at least as large
in each of them as an infeasible one, with its other settings the same, is infeasible for the same resource.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import Enum

from orchestrator.compile_ahead.limits import DeviceLimits
from orchestrator.compile_ahead.models import (
    COMPILE,
    REGISTERS,
    SHARED_MEMORY,
    SOURCE,
    THREADS,
    CompileOutcome,
    Frozen,
    ResourceProblem,
    ResourceReport,
)

# A knob is resource-increasing when its name says it sizes a block or tile, or counts pipeline stages.
INCREASING_NAME = re.compile(r"BLOCK|TILE|STAGES", re.IGNORECASE)
NOT_A_SIZE = re.compile(r"^NUM_(?!STAGES)|_NUM$|GROUP", re.IGNORECASE)  # NUM_BLOCKS counts programs
# Resources whose excess grows with every resource-increasing knob; a failed compile or a missing source
# says nothing about a neighbour.
PRUNABLE = frozenset({SHARED_MEMORY, REGISTERS, THREADS})
# Knobs that leave shared memory alone: more warps split the same pipelined tiles among more threads (equal
# shared memory at 4 and 8 warps in tests/compile_ahead/test_compile.py), maxnreg caps registers only.
SHARED_MEMORY_NEUTRAL = frozenset({"num_warps", "maxnreg"})
UNUSABLE_OUTCOMES = {
    CompileOutcome.SOURCE_FAILED: "the kernel could not be compiled as given (its file, name or parameters)",
    CompileOutcome.TIMEOUT: "the compile ran past its deadline",
    CompileOutcome.CRASHED: "the compile child died",
    CompileOutcome.REFUSED: "the compile child could not isolate itself",
}


class Verdict(str, Enum):
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"  # compile ahead could not tell; a GPU worker decides, as without it


class Feasibility(Frozen):
    verdict: Verdict
    resource: str | None = None  # the resource an infeasible config exceeds (models.RESOURCES)
    reason: str

    @property
    def infeasible(self) -> bool:
        return self.verdict is Verdict.INFEASIBLE


def limit_problems(limits: DeviceLimits, *, shared_bytes: int | None, registers_per_thread: int | None,
                   num_warps: int | None, max_threads_per_block: int | None) -> list[ResourceProblem]:
    """Every limit the compiled figures exceed, each with its numbers."""
    problems: list[ResourceProblem] = []
    if shared_bytes is not None and shared_bytes > limits.shared_memory_per_block:
        problems.append(ResourceProblem(resource=SHARED_MEMORY, message=(
            f"shared memory {shared_bytes} B > {limits.shared_memory_per_block} B limit ({limits.sm})")))
    if registers_per_thread is not None and registers_per_thread > limits.max_registers_per_thread:
        problems.append(ResourceProblem(resource=REGISTERS, message=(
            f"registers {registers_per_thread} per thread > {limits.max_registers_per_thread} limit ({limits.sm})")))
    if num_warps is not None:
        threads = num_warps * limits.warp_size
        allowed = limits.max_threads_per_block if max_threads_per_block is None else max_threads_per_block
        if threads > allowed:
            because = (f" at {registers_per_thread} registers per thread" if registers_per_thread is not None
                       and allowed < limits.max_threads_per_block else "")
            problems.append(ResourceProblem(resource=THREADS, message=(
                f"threads {threads} per block > {allowed} allowed{because} ({limits.sm})")))
    return problems


def judge(report: ResourceReport) -> Feasibility:
    """The verdict on one report: the first problem it names decides, an unusable outcome is `unknown`."""
    if report.outcome in UNUSABLE_OUTCOMES:
        why = UNUSABLE_OUTCOMES[report.outcome]
        detail = f": {report.detail.splitlines()[0]}" if report.detail.strip() else ""
        return Feasibility(verdict=Verdict.UNKNOWN, reason=f"{why}{detail}")
    if report.problems:
        first = report.problems[0]
        return Feasibility(verdict=Verdict.INFEASIBLE, resource=first.resource, reason=first.message)
    if report.outcome is not CompileOutcome.COMPILED:
        return Feasibility(verdict=Verdict.INFEASIBLE, resource=COMPILE,
                           reason=f"compile ended {report.outcome.value} without a named resource")
    spills = report.spill_store_bytes or 0
    note = f"; spills {spills} B per thread" if spills else ""
    occupancy = report.occupancy
    blocks = (f", {occupancy.blocks_per_sm} block{'' if occupancy.blocks_per_sm == 1 else 's'} per SM "
              f"({occupancy.limited_by})" if occupancy else "")
    return Feasibility(verdict=Verdict.FEASIBLE, reason=(
        f"within {report.target.limits.sm} limits: {report.shared_memory_bytes} B shared, "
        f"{report.registers_per_thread} registers{blocks}{note}"))


def build_failed_reason(report: ResourceReport, feasibility: Feasibility) -> str:
    """The one-line reason of the `build_failed` evaluation that an infeasible config gets instead of a worker."""
    return f"compile ahead ({report.target.limits.sm}): {feasibility.reason}"


def is_resource_knob(name: str) -> bool:
    """Block and tile sizes and pipeline stages: a larger value never needs fewer resources."""
    return bool(INCREASING_NAME.search(name)) and not NOT_A_SIZE.search(name)


def is_neighbour(infeasible: Mapping[str, int], candidate: Mapping[str, int]) -> bool:
    """`candidate` is at least as large as `infeasible` in every resource-increasing knob it names, and equal
    in its other knobs. Only the knobs `infeasible` names are compared; a candidate lacking one is not a
    neighbour (it is a different kind of config)."""
    for name, value in infeasible.items():
        if name not in candidate:
            return False
        if is_resource_knob(name):
            if candidate[name] < value:
                return False
        elif candidate[name] != value:
            return False
    return True


def pruning_knobs(knobs: Mapping[str, int], resource: str | None) -> dict[str, int]:
    """The knobs of a config infeasible for `resource` that a neighbour must match or exceed: all of them,
    less those that cannot change shared memory when that is the resource."""
    if resource == SHARED_MEMORY:
        return {name: value for name, value in knobs.items() if name not in SHARED_MEMORY_NEUTRAL}
    return dict(knobs)


def prune_neighbours(infeasible: Mapping[str, int], candidates: Sequence[Mapping[str, int]], *,
                     resource: str | None = SHARED_MEMORY) -> list[Mapping[str, int]]:
    """The candidates that are not neighbours of `infeasible` "in the same direction", in their order.

    `resource` is what made `infeasible` infeasible: pruning applies to shared memory (whatever the warps),
    registers and threads (same warps) only; for anything else (a compile error, an unknown verdict) every
    candidate is kept. To compare across another knob, leave it out of `infeasible`.
    """
    if resource not in PRUNABLE:
        return list(candidates)
    compared = pruning_knobs(infeasible, resource)
    return [candidate for candidate in candidates if not is_neighbour(compared, candidate)]


# Errors a module raises at import whatever the device: a variant that raises one of them here raises it on
# the GPU too. Others (RuntimeError, AssertionError, KeyError, ...) are what device queries raise without a
# GPU, so they leave the variant to a GPU worker.
DEVICE_FREE_ERRORS = frozenset({"SyntaxError", "IndentationError", "TabError", "NameError", "ImportError",
                                "ModuleNotFoundError", "AttributeError", "TypeError", "ValueError",
                                "ZeroDivisionError", "LookupError"})


def judge_source_error(error_type: str, message: str) -> Feasibility:
    """A variant that did not load in the compile child: `build_failed` when the error cannot be the missing
    GPU's doing, else `unknown`."""
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    said = f"{error_type}: {first}" if first else error_type
    if error_type in DEVICE_FREE_ERRORS:
        return Feasibility(verdict=Verdict.INFEASIBLE, resource=SOURCE, reason=f"the variant does not load: {said}")
    return Feasibility(verdict=Verdict.UNKNOWN, reason=f"the variant did not load without a GPU: {said}")


def judge_launches(compiles: Sequence[tuple[str, ResourceReport]], *, complete: bool,
                   why_incomplete: str = "") -> Feasibility:
    """The verdict on a variant from every compile its entry made, each in its group: one launch, or one
    autotune list. A launch fails when its compile is infeasible; an autotune list only when every config of
    it is (Triton's autotuner skips a config out of resources). The first failed group decides; otherwise a
    run that did not complete, or a group with an unknown compile, leaves the variant to a GPU worker."""
    groups: dict[str, list[ResourceReport]] = {}
    for group, report in compiles:
        groups.setdefault(group, []).append(report)
    unknown = ""
    for group, reports in groups.items():
        verdicts = [judge(report) for report in reports]
        if all(verdict.infeasible for verdict in verdicts):
            first, verdict = reports[0], verdicts[0]
            where = f"{first.kernel_name or 'kernel'} {first.config.label()}"
            if len(reports) > 1:
                where = f"every config of {first.kernel_name or 'the kernel'}'s autotune list ({len(reports)}), " \
                        f"the first {first.config.label()}"
            return Feasibility(verdict=Verdict.INFEASIBLE, resource=verdict.resource,
                               reason=f"{verdict.reason} [{where}]")
        if not unknown and not any(verdict.verdict is Verdict.FEASIBLE for verdict in verdicts):
            unknown = next(verdict.reason for verdict in verdicts if verdict.verdict is Verdict.UNKNOWN)
            unknown = f"{reports[0].kernel_name or 'kernel'} ({group.split(':')[0]}): {unknown}"
    if not complete:
        return Feasibility(verdict=Verdict.UNKNOWN, reason=why_incomplete or "the compile ahead did not finish")
    if unknown:
        return Feasibility(verdict=Verdict.UNKNOWN, reason=unknown)
    if not compiles:
        return Feasibility(verdict=Verdict.UNKNOWN, reason="the entry compiled no Triton kernel")
    compiled = [report for _, report in compiles if report.outcome is CompileOutcome.COMPILED]
    shared = max((report.shared_memory_bytes or 0 for report in compiled), default=0)
    registers = max((report.registers_per_thread or 0 for report in compiled), default=0)
    spills = max((report.spill_store_bytes or 0 for report in compiled), default=0)
    limits = compiles[0][1].target.limits
    return Feasibility(verdict=Verdict.FEASIBLE, reason=(
        f"{len(compiles)} compile{'' if len(compiles) == 1 else 's'} within {limits.sm} limits: at most {shared} B "
        f"shared, {registers} registers per thread" + (f", spills {spills} B per thread" if spills else "")))
