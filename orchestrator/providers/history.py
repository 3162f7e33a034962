"""What the run's history says, one line per experiment: failed hypotheses with what got worse, and the
changes that were promoted. Pure functions of `ExperimentRecord`s, for prompts (orchestrator/providers/prompt.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.providers.bottleneck import finite_number, format_number, ncu_summary
from orchestrator.text import one_line
from protocol.results import DecisionStatus, Evaluation, EvaluationStatus, ExperimentRecord

FAILED_DECISIONS = frozenset({DecisionStatus.REJECTED, DecisionStatus.FAILED, DecisionStatus.DUPLICATE})
_WORSE_WHEN_HIGHER = ("duration_us", "registers_per_thread", "local_load_bytes", "local_store_bytes")
_WORSE_WHEN_LOWER = ("achieved_occupancy_pct",)


def percent_change(before: float, after: float) -> str:
    """Signed relative change, one decimal (`+12.5%`); `new` when there was nothing before."""
    if before == 0:
        return "new"
    return f"{(after - before) / abs(before) * 100:+.1f}%"


def _reference_evaluation(record: ExperimentRecord) -> Evaluation | None:
    """The incumbent re-measured next to the candidate, when the record kept it."""
    return next((e for e in record.evaluations if e.label != "candidate" and e.label.startswith("incumbent")), None)


def metric_regressions(record: ExperimentRecord) -> list[str]:
    """Short phrases naming what got worse: failed phases, wrong cases, slower cases, worse NCU counters."""
    phrases: list[str] = []
    candidate = record.candidate_evaluation
    if candidate is not None and candidate.status is not EvaluationStatus.OK:
        phrases.append(f"{candidate.status.value}: {one_line(candidate.reason, 120)}")
    for comparison in record.comparisons:
        if comparison.correct is False:
            phrases.append(f"{comparison.case_id} incorrect")
        elif comparison.speedup is not None and comparison.speedup < 1.0:
            before, after = comparison.incumbent_median_us, comparison.candidate_median_us
            if before is not None and after is not None:
                phrases.append(
                    f"{comparison.case_id} median {format_number(before)}->{format_number(after)} µs "
                    f"({comparison.speedup:.3f}x)"
                )
            else:
                phrases.append(f"{comparison.case_id} {comparison.speedup:.3f}x")
    reference = _reference_evaluation(record)
    if candidate is not None and reference is not None:
        for case in candidate.cases:
            other = reference.case(case.case_id)
            if other is None:
                continue
            new, old = ncu_summary(case), ncu_summary(other)
            for name in _WORSE_WHEN_HIGHER + _WORSE_WHEN_LOWER:
                if name not in new or name not in old:
                    continue
                worse = new[name] > old[name] * 1.01 if name in _WORSE_WHEN_HIGHER else new[name] < old[name] * 0.99
                if worse:
                    phrases.append(
                        f"{case.case_id} {name} {format_number(old[name])}->{format_number(new[name])} "
                        f"({percent_change(old[name], new[name])})"
                    )
    return phrases


def _speedup_label(record: ExperimentRecord) -> str:
    value = finite_number(record.aggregate_speedup)
    return f", {value:.3f}x" if value is not None else ""


def _exclusion_entry(record: ExperimentRecord, detailed: bool) -> str:
    status = record.decision.status.value if record.decision else "unknown"
    head = f"{record.experiment_id} [{status}{_speedup_label(record)}]"
    hypothesis = record.metadata.hypothesis or "(no hypothesis recorded)"
    regressions = metric_regressions(record)
    if not detailed:
        worst = f"; {one_line(regressions[0], 80)}" if regressions else ""
        return f"{head}: {one_line(hypothesis, 100)}{worst}"
    parts = [f"{head}: hypothesis: {one_line(hypothesis, 240)}"]
    if record.metadata.change:
        parts.append(f"change: {one_line(record.metadata.change, 240)}")
    if regressions:
        parts.append("regressions: " + one_line("; ".join(regressions[:8]), 400))
    if record.decision and record.decision.reason:
        parts.append(f"decision: {one_line(record.decision.reason, 200)}")
    return " | ".join(parts)


def exclusion_list(history: Sequence[ExperimentRecord], *, detailed_recent: int | None = None) -> list[str]:
    """One line per failed hypothesis (rejected, failed, duplicate), oldest first, never dropped.

    With `detailed_recent=k`, only the newest k entries keep change, regressions and decision; older ones
    shrink to id, status, hypothesis and the worst regression. The list itself never rolls off.
    """
    failed = [r for r in history if r.decision is not None and r.decision.status in FAILED_DECISIONS]
    cutoff = 0 if detailed_recent is None else max(len(failed) - detailed_recent, 0)
    return [_exclusion_entry(record, detailed=index >= cutoff) for index, record in enumerate(failed)]


def accepted_changes(history: Sequence[ExperimentRecord]) -> list[str]:
    """One line per promoted experiment: what worked, so the next proposal can build on it."""
    lines = []
    for record in history:
        if record.decision is not None and record.decision.status is DecisionStatus.PROMOTED:
            change = record.metadata.change or record.metadata.hypothesis or "(no change recorded)"
            lines.append(f"{record.experiment_id} [promoted{_speedup_label(record)}]: {one_line(change, 160)}")
    return lines
