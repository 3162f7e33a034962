"""The run's profiling steps: evidence, escalation and the veto per candidate; diagnostic instrumentation.

Pure rules live in `orchestrator.decision.profile_rules`; this module decides when to ask a worker for more and writes what
came back to the live log and the experiment's profile.json.
"""

from __future__ import annotations

from pathlib import Path

import trio

from orchestrator.decision import profile_rules
from orchestrator.decision.gates import Verdict
from orchestrator.run.evaluator import Evaluator
from orchestrator.run.ledger import reporting
from orchestrator.run.ledger.artifacts import write_json
from orchestrator.run.state import RunState
from protocol.profile import CaseProfileComparison, DiagnosticProfile
from protocol.results import Evaluation, ExperimentRecord
from protocol.roles import Role


async def profile_evidence(evaluator: Evaluator, state: RunState, record: ExperimentRecord, candidate: Evaluation,
                           incumbent: Evaluation, verdict: Verdict, deadline: float) -> str | None:
    """Log Proton/NCU figures and deltas, escalate to a deep profile when the evidence calls for it,
    and return the veto (or None): an NCU regression, or on a protected case a benchmark speedup that the
    profilers' kernel times do not back, or GPU work moved out of `main_scope` (profile_rules)."""
    cases = [c.case_id for c in evaluator.inputs.cases]
    incumbent_profiles = reporting.profiles_by_case(incumbent)
    candidate_profiles = reporting.profiles_by_case(candidate)
    disagreements, cross_checks = [], []
    protected = {c.case_id for c in evaluator.inputs.cases if c.protected}
    for case_id in cases:
        row = next((r for r in verdict.comparisons if r.case_id == case_id), None)
        times = profile_rules.kernel_times(candidate_profiles.get(case_id), incumbent_profiles.get(case_id))
        speeds = {tool: paired.speedup for tool, paired in times.items()}
        benchmark = profile_rules.PairedTimes(row.incumbent_median_us, row.candidate_median_us) if row and row.speedup \
            else profile_rules.PairedTimes(None, None)
        text = profile_rules.measurements_disagree({"benchmark": benchmark, **times})
        if text:
            disagreements.append(f"{case_id}: {text}")
        if case_id in protected:
            backing = {**speeds, "proton_all_kernels": profile_rules.gpu_time_speedup(
                candidate_profiles.get(case_id), incumbent_profiles.get(case_id))}
            cross_checks.append(profile_rules.unbacked_speedup_veto(case_id, row.speedup if row else None, backing))
            if not evaluator.inputs.target.allow_work_outside_main_scope and evaluator.inputs.target.main_scope:
                cross_checks.append(profile_rules.outside_main_scope_veto(
                    case_id, candidate_profiles.get(case_id), incumbent_profiles.get(case_id)))
    reasons = profile_rules.deep_profile_reasons(
        is_baseline=False, is_finalist=False, correct=verdict.decision.gates.get("correct", False),
        speedup=verdict.aggregate_speedup, min_speedup=evaluator.config.budget.min_speedup,
        rounds_without_promotion=state.rounds_without_promotion, disagreement="; ".join(disagreements) or None)
    deep: Evaluation | None = None
    if reasons and trio.current_time() < deadline:
        evaluator.log.event(f"{record.experiment_id} deep_profile=taken reasons={','.join(reasons)}"
                       + (f" disagreement={'; '.join(disagreements)!r}" if disagreements else ""))
        deep = await evaluator.evaluate(state, role=Role.DEEP_PROFILE, experiment_id=record.experiment_id,
                                   kernel_path=Path(record.source_path), tag="deep-profile", deadline=deadline,
                                   profile_level="deep", profile_reason=",".join(reasons), benchmark=False)
        record.evaluations.append(deep)
    else:
        why = ("clearly below the threshold" if profile_rules.clearly_slow(verdict.aggregate_speedup,
                                                                              evaluator.config.budget.min_speedup)
               else "summary evidence is sufficient (not near the threshold, no disagreement, no stagnation)")
        evaluator.log.event(f"{record.experiment_id} deep_profile=skipped reason={why!r}")
    profiles: dict[str, CaseProfileComparison] = {}
    veto = None
    for case_id in cases:
        mine = (deep.case(case_id).profile if deep and deep.case(case_id) else None) or candidate_profiles.get(case_id)
        theirs = incumbent_profiles.get(case_id)
        deltas = profile_rules.profile_deltas(mine, theirs)
        profiles[case_id] = CaseProfileComparison(profile=mine, deltas=deltas)
        evaluator.log.event(f"{record.experiment_id} profile case={case_id} "
                       + reporting.format_profile_for_log(mine, deltas))
        veto = veto or profile_rules.ncu_regression_veto(mine, theirs)
        unchecked = profile_rules.ncu_veto_unavailable_reason(mine, theirs)
        if unchecked:
            profiles[case_id].veto_diagnostic = unchecked
    write_json(evaluator.artifacts.experiment_dir(record.experiment_id) / "profile.json", profiles)
    evidence = evidence_veto(evaluator, state, candidate, verdict,
                             {case_id: comparison.profile for case_id, comparison in profiles.items()})
    return evidence or veto or next((text for text in cross_checks if text), None)


def required_evidence(evaluator: Evaluator, state: RunState) -> list[str]:
    """The profilers every candidate must bring for every protected case: those that measured the untouched
    kernel in this run (none with profiling off, or on a machine without a profiler: a property of the run)."""
    if not evaluator.config.profile:
        return []
    baseline = next((r for r in state.experiments if r.experiment_id == "baseline"), None)
    if baseline is None or not baseline.evaluations:
        return []
    return profile_rules.tools_with_evidence(reporting.profiles_by_case(baseline.evaluations[-1]))


def evidence_line(evaluator: Evaluator, state: RunState) -> str:
    """The live-log line that says, once, what profile evidence this run requires and why."""
    required = required_evidence(evaluator, state)
    if required:
        return (f"profile_evidence required={','.join(required)} (a candidate whose profile is missing, or disagrees "
                "with its benchmark, is not promoted)")
    why = ("profiling is off (--no-profile)" if not evaluator.config.profile else
           "no profiler measured the untouched kernel on this machine")
    return f"profile_evidence required=none reason={why!r}: candidates are promoted on the benchmark alone"


def evidence_veto(evaluator: Evaluator, state: RunState, candidate: Evaluation, verdict: Verdict,
                  profiles: dict[str, dict | None] | None = None) -> str | None:
    """The veto when a protected case's required profile is missing or disagrees with the benchmark."""
    required = required_evidence(evaluator, state)
    if not required:
        return None
    profiles = profiles if profiles is not None else reporting.profiles_by_case(candidate)
    problems = []
    for case in evaluator.inputs.cases:
        if not case.protected:
            continue
        row = next((r for r in verdict.comparisons if r.case_id == case.case_id), None)
        measured = candidate.case(case.case_id)
        launches = int((measured.metrics if measured else {}).get("benchmark.replayed_launches") or 1)
        problem = profile_rules.evidence_problem(case.case_id, profiles.get(case.case_id),
                                                 row.candidate_median_us if row else None, required, launches)
        if problem:
            problems.append(problem)
    return "profile evidence: " + "; ".join(problems) if problems else None


async def diagnostic_instrumentation(evaluator: Evaluator, state: RunState, experiment_id: str, kernel_path: Path,
                                     deadline: float) -> None:
    """Proton intra-kernel traces (warp granularity) in their own worker, kept apart:
    written to diagnostic_profile.json, never benchmarked, never given to a decision, never committed."""
    if not (evaluator.config.diagnostic_instrumentation and evaluator.config.profile):
        return
    evaluation = await evaluator.evaluate(state, role=Role.DIAGNOSTIC, experiment_id=experiment_id,
                                     kernel_path=kernel_path, tag="diagnostic-instrumentation", deadline=deadline,
                                     profile_level="deep", profile_reason="diagnostic_instrumentation",
                                     benchmark=False)
    write_json(evaluator.artifacts.experiment_dir(experiment_id) / "diagnostic_profile.json",
               DiagnosticProfile(diagnostic_only=True, status=evaluation.status, reason=evaluation.reason,
                                 profiles=reporting.profiles_by_case(evaluation)))
    available = [m.case_id for m in evaluation.cases if (m.profile or {}).get("instrumentation", {}) and
                 (m.profile or {}).get("instrumentation", {}).get("available")]
    evaluator.log.event(f"{experiment_id} diagnostic_instrumentation={evaluation.status.value} "
                   f"traces={len(available)}/{len(evaluation.cases)} diagnostic_only=true "
                   "(never benchmarked, promoted or committed)")
