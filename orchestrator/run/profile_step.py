"""The run's profiling steps: what profile evidence the referee judges, and diagnostic instrumentation.

The evidence itself (deep-profile escalation, the vetoes) is judged by the referee (`orchestrator/decision/referee.py`
with `evidence.py` and `profile_rules.py`); this module says what it is judged with (the profilers that measured the
untouched kernel, the incumbent's profiles) and runs the instrumentation workers that never decide anything.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.decision import profile_rules
from orchestrator.decision.evidence import Evidence, profiles_by_case
from orchestrator.ledger import reporting
from orchestrator.ledger.artifacts import write_json
from orchestrator.run.evaluator import Evaluates
from orchestrator.run.state import RunState
from protocol.profile import DiagnosticProfile
from protocol.results import Evaluation
from protocol.roles import Role


def evidence(evaluator: Evaluates, state: RunState, incumbent: Evaluation) -> Evidence | None:
    """What the referee judges a decision's profile evidence with: None with profiling off, and None where no
    profiler measured the untouched kernel (a machine without one): a candidate's profile would then be judged
    against nothing, and asking for it would cost a worker per promotion for no evidence."""
    required = tuple(required_evidence(evaluator, state))
    if not required:
        return None
    target = evaluator.inputs.target
    return Evidence(required=required,
                    incumbent_profiles=profiles_by_case(incumbent),
                    check_main_scope=bool(not target.allow_work_outside_main_scope and target.main_scope),
                    rounds_without_promotion=state.rounds_without_promotion)


def required_evidence(evaluator: Evaluates, state: RunState) -> list[str]:
    """The profilers every candidate must bring for every protected case: those that measured the untouched
    kernel in this run (none with profiling off, or on a machine without a profiler: a property of the run)."""
    if not evaluator.config.profile:
        return []
    baseline = next((r for r in state.experiments if r.experiment_id == "baseline"), None)
    if baseline is None or not baseline.evaluations:
        return []
    return profile_rules.tools_with_evidence(reporting.profiles_by_case(baseline.evaluations[-1]))


def evidence_line(evaluator: Evaluates, state: RunState) -> str:
    """The live-log line that says, once, what profile evidence this run requires and why."""
    required = required_evidence(evaluator, state)
    if required:
        return (f"profile_evidence required={','.join(required)} (a candidate whose profile is missing, or disagrees "
                "with its benchmark, is not promoted)")
    why = ("profiling is off (--no-profile)" if not evaluator.config.profile else
           "no profiler measured the untouched kernel on this machine")
    return f"profile_evidence required=none reason={why!r}: candidates are promoted on the benchmark alone"


async def diagnostic_instrumentation(evaluator: Evaluates, state: RunState, experiment_id: str, kernel_path: Path,
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
