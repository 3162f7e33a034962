"""After a failed final revalidation: which earlier promotion is revalidated next, and what the run says of each.

The finalist is the last promotion. When it fails its revalidation next to fresh baseline runs (1.0098x against
1.01x, a protected case slower, a veto), an earlier promotion may still hold its gain: each promotion passed every
gate against the incumbent of its day. While the time budget allows one more revalidation
(`decision/time_budget.revalidation_fits`), the run revalidates the next-best of them, the same way, and ends
only then; the commits keep exactly the revalidated winner's content (`run/commit_step.py`, `CommitStep.rollback`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from protocol.results import DecisionStatus, ExperimentRecord, FinalistAttempt


def promoted_candidates(experiments: Sequence[ExperimentRecord]) -> list[ExperimentRecord]:
    return [r for r in experiments if r.round_index >= 1 and r.decision is not None
            and r.decision.status is DecisionStatus.PROMOTED]


def chained_lower_bound(record: ExperimentRecord, experiments: Sequence[ExperimentRecord]) -> float:
    """What the referee's records support of a promotion's speedup over the baseline: the product of the lower
    bounds of every promotion on its way from the baseline (its own, its parent's, ...).

    A promotion's recorded figures are against the incumbent of its day, not the baseline; only the chain of
    them reaches the baseline, and each link was measured side by side (A/B/A), so drift between the links does
    not enter. Lower bounds, not point estimates: the finalist just showed that a point estimate can fail to
    reproduce, and the bound is what the noise gate certified. A link without a recorded test counts its point
    estimate (records of older versions), one without either counts 1."""
    by_id = {r.experiment_id: r for r in experiments}
    product, seen = 1.0, set()
    current: ExperimentRecord | None = record
    while current is not None and current.experiment_id != "baseline" and current.experiment_id not in seen:
        seen.add(current.experiment_id)
        bound = current.statistics.get("lower_bound") if current.statistics else None
        link = bound if isinstance(bound, (int, float)) and math.isfinite(bound) else current.aggregate_speedup
        product *= float(link) if link and link > 0 else 1.0
        current = by_id.get(current.parent_id or "")
    return product


def next_best(experiments: Sequence[ExperimentRecord], tried: set[str]) -> ExperimentRecord | None:
    """The promotion not yet revalidated with the highest chained lower bound over the baseline (ties: the later
    one). Every link of a promotion chain passed the noise gate (lower bound > 1), so this is the finalist's
    parent, then its parent, ...; a record whose figures say otherwise is ordered by what they say."""
    left = [r for r in promoted_candidates(experiments) if r.experiment_id not in tried]
    if not left:
        return None
    order = {r.experiment_id: index for index, r in enumerate(experiments)}
    return max(left, key=lambda r: (chained_lower_bound(r, experiments), order[r.experiment_id]))


def attempt_of(record: ExperimentRecord) -> FinalistAttempt:
    """A revalidation record as the result lists it."""
    accepted = record.decision is not None and record.decision.status is DecisionStatus.REVALIDATED
    return FinalistAttempt(experiment_id=record.parent_id or "", revalidation_id=record.experiment_id,
                           status="revalidated" if accepted else "rejected",
                           reason=record.decision.reason if record.decision else "no decision",
                           aggregate_speedup=record.aggregate_speedup)


def attempts_detail(attempts: Sequence[FinalistAttempt]) -> str:
    """One clause per finalist after the first, for result.json's stopping detail."""
    return "; ".join(f"the next-best {a.experiment_id} {'was revalidated' if a.status == 'revalidated' else 'failed too'}"
                     f" ({a.revalidation_id}: {a.reason})" for a in attempts[1:])
