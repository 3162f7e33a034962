"""Compile ahead for a screening: which variants go to the screening worker, and which come back `build_failed`.

Every variant of a screening on a CUDA target is compiled for the target first (orchestrator/compile_ahead/),
in parallel lanes on the host's cores, within a share of the screening's time. A variant whose compile over-ran
a resource, failed, or whose file does not load never reaches the GPU worker: it comes back `build_failed`
with the resource named, and its configs are remembered (`InfeasibleStore`). When compile ahead judged the
control feasible (it works for this kernel), a variant it could not judge (its compile outran the share, or
its deadline) is not screened either: only what was compiled within the limits reaches the GPU, and a compile
that slow would spend the worker's time too. When it could not judge the control, it cannot judge this
kernel, and such variants go to the worker as before.

The first variant is the screening's control (the incumbent, already measured on the GPU): it always goes to
the worker, and if compile ahead calls it infeasible, compile ahead disagrees with the GPU, so this
screening holds nothing back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from orchestrator.compile_ahead.feasibility import Verdict
from orchestrator.compile_ahead.variants import VariantCheck
from protocol.worker import ScreenedVariant

SHARE_OF_SCREENING = 0.3  # of a screening's seconds: compile ahead runs on the host while no GPU is busy
SECONDS_PER_VARIANT = 180.0  # one variant's child: imports, inputs and every case's compiles


@dataclass(frozen=True)
class Partition:
    """Indices of the variants for the worker, in order, and the verdicts of those held back, by index."""

    to_worker: list[int]
    held_back: dict[int, ScreenedVariant] = field(default_factory=dict)
    note: str = ""  # why nothing was held back, when compile ahead was overruled


def lanes_for_host() -> int:
    """Compile children at a time: the host's cores less one, which the run itself keeps."""
    return max(1, (os.cpu_count() or 2) - 1)


def partition(variant_ids: list[str], checks: list[VariantCheck | None]) -> Partition:
    """Split a screening's variants by their compile-ahead verdicts (None: not compiled ahead)."""
    if checks and checks[0] is not None and checks[0].feasibility.infeasible:
        return Partition(to_worker=list(range(len(variant_ids))), note=(
            "compile ahead called the control infeasible, which the GPU ran: nothing held back "
            f"({checks[0].feasibility.reason})"))
    judges_this_kernel = bool(checks) and checks[0] is not None and checks[0].feasibility.verdict is Verdict.FEASIBLE
    held: dict[int, ScreenedVariant] = {}
    for index, (variant_id, check) in enumerate(zip(variant_ids, checks, strict=True)):
        if index == 0 or check is None:
            continue
        if check.feasibility.infeasible:
            reason = f"compile ahead: {check.feasibility.reason}"
            held[index] = ScreenedVariant(variant_id=variant_id, status="build_failed", reason=reason[:2000])
        elif judges_this_kernel and check.feasibility.verdict is Verdict.UNKNOWN:
            # "not screened" is no evidence against the configuration (the search leaves it open)
            reason = f"not screened: compile ahead could not judge it ({check.feasibility.reason})"
            held[index] = ScreenedVariant(variant_id=variant_id, status="failed", reason=reason[:2000])
    return Partition(to_worker=[index for index in range(len(variant_ids)) if index not in held], held_back=held)


def merge(variant_ids: list[str], held_back: dict[int, ScreenedVariant],
          screened: list[ScreenedVariant]) -> list[ScreenedVariant]:
    """Every variant's screening in the original order: the worker's results by id, then those held back."""
    by_id = {variant.variant_id: variant for variant in screened}
    missing = ScreenedVariant(variant_id="", status="failed", reason="not screened: the worker returned no result")
    return [held_back[index] if index in held_back
            else by_id.get(variant_id, missing.model_copy(update={"variant_id": variant_id}))
            for index, variant_id in enumerate(variant_ids)]


def summary(check: VariantCheck) -> dict[str, object]:
    """What screening.jsonl keeps of a variant's compile ahead: the verdict and its largest figures."""
    reports = [compile.report for compile in check.compiles]
    return {"verdict": check.feasibility.verdict.value, "resource": check.feasibility.resource,
            "reason": check.feasibility.reason, "compiles": len(reports), "seconds": check.seconds,
            "shared_memory_bytes": max((r.shared_memory_bytes or 0 for r in reports), default=None),
            "registers_per_thread": max((r.registers_per_thread or 0 for r in reports), default=None),
            "spill_store_bytes": max((r.spill_store_bytes or 0 for r in reports), default=None)}
