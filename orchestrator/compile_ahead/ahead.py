"""Compile ahead for a run: which targets it applies to, one candidate checked before its GPU workers, and what
the run remembers of an infeasible variant.

A run's target (target.json) names an architecture; compile ahead applies when that is a CUDA device whose
compute capability has recorded limits (limits.py) and the run is not on the CPU interpreter. Elsewhere every
function here answers None and nothing changes.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.bundle.arch import CUDA, CUDA_BACKENDS, interpreter_requested, lookup, normalize
from orchestrator.compile_ahead.feasibility import PRUNABLE, Feasibility, is_neighbour, pruning_knobs
from orchestrator.compile_ahead.limits import LIMITS
from orchestrator.compile_ahead.models import CompileTarget
from orchestrator.compile_ahead.signature import kernel_scope
from orchestrator.compile_ahead.store import InfeasibleEntry, InfeasibleRecords, InfeasibleStore
from orchestrator.compile_ahead.variants import (
    KeepKernels,
    VariantCheck,
    VariantJob,
    VariantProgress,
    check_variant,
)
from protocol.bundle import Target
from protocol.devices import peaks_for

STORE_NAME = "infeasible_configs.jsonl"  # in the run's output directory


def compile_target_for(target: Target) -> CompileTarget | None:
    """The target to compile ahead for, or None: a CPU or interpreter run, an architecture whose compute
    capability is not known, or one without recorded limits."""
    if interpreter_requested(target) or normalize(target.backend) not in CUDA_BACKENDS:
        return None
    spec = lookup(target.architecture)
    if spec is None or spec.kind != CUDA or spec.cuda_major is None:
        return None
    capability = spec.cuda_major * 10
    return CompileTarget(arch=capability) if capability in LIMITS else None


def device_properties_for(target: Target, device_name: str | None = None) -> dict[str, int]:
    """What compile ahead answers for the target's device where module code or a wrapper asks (`torch.cuda
    .get_device_properties(...).multi_processor_count` for a persistent kernel's program count): the SM count
    (protocol/devices.py) of the device the run's baseline worker reported, else of the one target.json's
    architecture names (`h200`); {} for a device not listed (`sm_90` names none), which stays unknown."""
    peaks = peaks_for(device_name) or peaks_for(target.architecture) or peaks_for(target.device)
    return {"multiprocessor_count": peaks.multiprocessors} if peaks and peaks.multiprocessors else {}


async def check_ahead(source_path: Path, *, harness_path: Path, cases: list[dict[str, Any]], target: Target,
                      python: str = sys.executable, seconds: float = 300.0) -> Feasibility | None:
    """One candidate file compiled ahead through the harness's entry, before any GPU worker: None when the
    target takes no compile ahead, else the verdict (`infeasible` names the resource; `unknown` leaves the
    candidate to its GPU workers, as without compile ahead)."""
    check = await check_candidate(source_path, harness_path=harness_path, cases=cases, target=target, python=python,
                                  seconds=seconds)
    return None if check is None else check.feasibility


async def check_candidate(source_path: Path, *, harness_path: Path, cases: list[dict[str, Any]], target: Target,
                          python: str = sys.executable, seconds: float = 300.0,
                          keep_kernels: KeepKernels | None = None,
                          progress: VariantProgress | None = None, device_name: str | None = None) -> VariantCheck | None:
    """`check_ahead` with every compile behind the verdict (for the experiment's record); `keep_kernels` and
    `progress` as in `check_variant`; `device_name`, the device the run measures on (`device_properties_for`)."""
    compile_target = compile_target_for(target)
    if compile_target is None:
        return None
    job = VariantJob(source_path=source_path, harness_path=harness_path, cases=cases, target=compile_target,
                     python=python, environment=dict(target.environment),
                     device_properties=device_properties_for(target, device_name))
    return await check_variant(job, seconds=seconds, keep_kernels=keep_kernels, progress=progress)


def remember_infeasible(store: InfeasibleStore, source: str, check: VariantCheck) -> list[InfeasibleEntry]:
    """Record each compile of an infeasible variant that over-ran a resource, scoped by its kernel's text and
    the target; a kernel this file does not define (imported from elsewhere) is not remembered."""
    if not check.feasibility.infeasible:
        return []
    written = []
    for report in check.infeasible_reports():
        verdict = Feasibility(verdict=check.feasibility.verdict, resource=report.problems[0].resource
                              if report.problems else check.feasibility.resource, reason=check.feasibility.reason)
        if verdict.resource not in PRUNABLE or report.kernel_name is None:
            continue
        try:
            scope = kernel_scope(source, report.kernel_name, report.target)
        except (SyntaxError, LookupError, ValueError):
            continue
        entry = store.record(scope, report.config.knobs(), verdict, triton_version=report.triton_version)
        if entry is not None:
            written.append(entry)
    return written


def remembered_for(store: InfeasibleRecords, source: str, kernel_name: str, target: Target) -> list[tuple[dict[str, int], str]]:
    """The infeasible configs remembered for this kernel's text on this target, as (knobs, resource): what the
    tuner's search prunes before it proposes."""
    compile_target = compile_target_for(target)
    if compile_target is None:
        return []
    try:
        scope = kernel_scope(source, kernel_name, compile_target)
    except (SyntaxError, LookupError, ValueError):
        return []
    return [(dict(entry.knobs), entry.resource) for entry in store.entries() if entry.scope == scope]


def remembered_in_source(store: InfeasibleRecords, source: str, target: Target) -> list[tuple[dict[str, int], str]]:
    """`remembered_for` every module-level function of the file that carries a decorator (the Triton kernels
    among them): the tuner knows the kernel file, not which of its functions a config was remembered for."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.decorator_list]
    return [found for name in names for found in remembered_for(store, source, name, target)]


def refused_configuration(store: InfeasibleStore, source: str, configuration: Mapping[str, int],
                          target: Target) -> tuple[dict[str, int], str] | None:
    """The remembered infeasible config (knobs, resource) that rules out `configuration` for this file's kernels:
    the same config, or a neighbour in the same direction, compared on the knobs `configuration` names (as the
    tuner's own search prunes, orchestrator/providers/tune/search.py); None when nothing rules it out."""
    for knobs, resource in remembered_in_source(store, source, target):
        compared = {name: value for name, value in knobs.items() if name in configuration}
        if compared and resource in PRUNABLE and is_neighbour(pruning_knobs(compared, resource), configuration):
            return dict(knobs), resource
    return None
