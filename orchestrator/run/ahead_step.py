"""A candidate compiled ahead before its GPU workers: one over the device's limits spends none.

On a CUDA target the candidate file is compiled for the device on the host (orchestrator/compile_ahead/); a
config that needs more shared memory, registers or threads than the device has is a `build_failed`
evaluation naming the resource, with no worker started, and is remembered (the run's infeasible store) so the
tuner does not propose it, or its neighbours in the same direction, again. A verdict of `unknown` (a compile
ahead cannot tell, e.g. the module queries the GPU at import) leaves the candidate to its workers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.compile_ahead.ahead import check_candidate, remember_infeasible
from protocol.results import Evaluation, EvaluationStatus
from protocol.roles import Role

if TYPE_CHECKING:
    from orchestrator.compile_ahead.store import InfeasibleStore
    from orchestrator.run.evaluator import Evaluates

SECONDS = 120.0  # at most this long per candidate; a compile ahead cut off says unknown and decides nothing


async def compiled_ahead(evaluator: Evaluates, store: InfeasibleStore | None, experiment_id: str, source: str,
                         source_path: Path, seconds_left: float, *, screened_in: str | None = None,
                         device_name: str | None = None) -> Evaluation | None:
    """The candidate's `build_failed` evaluation when it cannot run on the device, else None. `screened_in`
    names the screening whose compile ahead already found this exact source within the limits (its kernels are
    in the run's cache): it is not compiled again."""
    if screened_in is not None:
        evaluator.log.event(f"{experiment_id} compile_ahead skipped: {screened_in} compiled this exact source within "
                            "the device's limits")
        return None
    seconds = min(SECONDS, seconds_left / 4)
    if seconds <= 5:
        return None
    check = await check_candidate(source_path, harness_path=evaluator.bundle.harness_path,
                                  cases=[case.model_dump() for case in evaluator.inputs.cases],
                                  target=evaluator.inputs.target, python=evaluator.config.worker_python,
                                  seconds=seconds, keep_kernels=evaluator.kernel_cache.keep, device_name=device_name,
                                  progress=lambda compiles, elapsed: evaluator.log.event(
                                      f"{experiment_id} compile_ahead compiles={compiles} seconds={elapsed:.0f} "
                                      f"(at most {seconds:.0f} s)"))
    if check is not None and check.kernel_groups_kept:
        evaluator.log.event(f"{experiment_id} compile_ahead kernel_groups_kept={check.kernel_groups_kept} "
                            "(compiled kernels its workers start with)")
    if check is None or not check.feasibility.infeasible:
        return None
    if store is not None:
        remember_infeasible(store, source, check)
    return Evaluation(label=Role.CANDIDATE.value, status=EvaluationStatus.BUILD_FAILED,
                      reason=f"compile ahead ({check.feasibility.resource or 'build'}): {check.feasibility.reason}")
