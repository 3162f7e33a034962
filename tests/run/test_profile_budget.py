"""A profile the run's time cuts is not taken; a profile that outlasts its own limits while time remains fails.

Real workers (`run_evaluation`) on the profiled synthetic bundle (tests/e2e/profiled: its profiler takes
`PROFILE_SECONDS` per case), then the real loop in-process (tests/run/fake_evaluator.py) for what the referee makes
of a profile not taken: a correct, faster candidate keeps its measurements but is not promoted without the
evidence the run requires (how long it takes before its profile is the candidate's to stretch), and a profile
missing for any other reason vetoes it too."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import trio

from orchestrator.providers.replay import ReplayProvider
from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import SubprocessSpawner
from protocol.bundle import Budget, load_cases_file, load_target_file
from protocol.profile import ProfileRequest
from protocol.results import Evaluation, EvaluationStatus
from protocol.roles import Role
from tests.conftest import PROJECT_ROOT, synthetic_kernel, write_candidates
from tests.faults.corpus import processes_of_run
from tests.run.fake_evaluator import Request, run_in_process, synthetic

pytestmark = pytest.mark.timeout(180)

PROFILED = PROJECT_ROOT / "tests" / "e2e" / "profiled"
SLOW_PROFILE = synthetic_kernel(50.0, prelude="PROFILE_SECONDS = 60.0\n")


def evaluate(tmp_path: Path, source: str, *, deadline: float, profile_until: float | None,
             profile_seconds: dict[str, float] | None = None) -> tuple[Evaluation, float]:
    """One evaluation with a summary profile per case; deadline and profile_until in seconds from its start."""
    kernel = tmp_path / "kernel.py"
    kernel.write_text(source)

    async def main() -> Evaluation:
        now = trio.current_time()
        plan = EvaluationPlan(
            label="candidate", experiment_id="r001-c000", run_id="budget", kernel_path=kernel,
            harness_path=PROFILED / "harness.py", target=load_target_file(PROFILED / "target.json"),
            cases=load_cases_file(PROFILED / "cases.json"), repetitions=5, work_dir=tmp_path / "worker",
            log_path=tmp_path / "worker.log", deadline=now + deadline, phase_seconds=deadline,
            profile_request=lambda case: ProfileRequest(level="summary", experiment_id="r001-c000",
                                                        artifacts_dir=str(tmp_path / "worker" / "profile" / case.case_id)),
            profile_until=now + profile_until if profile_until is not None else None,
            profile_seconds=profile_seconds or {})
        return await run_evaluation(plan, SubprocessSpawner(), dict(os.environ))

    started = time.monotonic()
    evaluation = trio.run(main)
    assert processes_of_run(tmp_path) == []  # the busy worker was ended with its whole tree
    return evaluation, time.monotonic() - started


def test_a_profile_the_runs_time_cuts_is_not_taken_and_the_measurements_stand(tmp_path):
    evaluation, seconds = evaluate(tmp_path, SLOW_PROFILE, deadline=120.0, profile_until=20.0)
    assert evaluation.status is EvaluationStatus.OK, evaluation.reason
    assert all(case.correct and case.stats is not None for case in evaluation.cases)  # the measurements stand
    assert [case.profile_not_taken for case in evaluation.cases] == ["budget", "budget"]
    assert all(case.profile is None for case in evaluation.cases)
    assert "profile not taken: budget (small, large: the run's time ran out)" in evaluation.reason
    assert "profile (case small) not finished after" in evaluation.reason  # cut while it ran, not before
    assert seconds < 50  # the 60 s profile was not waited for


def test_a_profile_is_not_started_when_less_is_left_than_the_untouched_kernels_took(tmp_path):
    evaluation, _ = evaluate(tmp_path, synthetic_kernel(50.0), deadline=120.0, profile_until=60.0,
                             profile_seconds={"small": 0.0, "large": 500.0})
    assert evaluation.status is EvaluationStatus.OK, evaluation.reason
    assert [(case.case_id, case.profile is not None, case.profile_not_taken) for case in evaluation.cases] == [
        ("small", True, None), ("large", False, "budget")]
    assert evaluation.worker.exit_code == 0  # nothing was cut: the worker shut down cleanly


def test_a_profile_that_outlasts_its_own_deadline_while_the_run_has_time_fails_the_candidate(tmp_path):
    evaluation, _ = evaluate(tmp_path, SLOW_PROFILE, deadline=20.0, profile_until=600.0)
    assert evaluation.status is EvaluationStatus.TIMEOUT
    assert "timed out in profile (case small)" in evaluation.reason
    assert not any(case.profile_not_taken for case in evaluation.cases)


# ---- the loop: what the referee makes of a profile not taken -----------------------------------------------

def profiled(*, not_taken: set[tuple[str, str]] = frozenset(), failed: set[tuple[str, str]] = frozenset()):
    """Synthetic samples with a Proton profile that agrees with them wherever a profile is asked for; for the
    (experiment, tag) pairs in `not_taken` the run's time allowed none, in `failed` the profiler failed."""
    honest = synthetic()

    def respond(request: Request, cases):
        evaluation = honest(request, cases)
        if request.profile_level is None:
            return evaluation
        for case in evaluation.cases:
            if (request.experiment_id, request.tag) in not_taken:
                case.profile_not_taken = "budget"
            elif (request.experiment_id, request.tag) in failed:
                case.profile = {"available": False, "error": "RuntimeError: the profiler crashed"}
            elif case.stats is not None:
                case.profile = {"proton": {"available": True, "main_kernel_us": case.stats.median,
                                           "non_main_kernel_us": 0.0, "total_kernel_us": case.stats.median}}
        return evaluation

    return respond


FASTER = synthetic_kernel(50.0)
PROFILED_BUNDLE = PROJECT_ROOT / "tests" / "e2e" / "synthetic"


def test_a_candidate_whose_profile_the_budget_cut_keeps_its_measurements_but_is_not_promoted(tmp_path):
    cut = {("r001-c000", "1-candidate")}
    run = run_in_process(PROFILED_BUNDLE, tmp_path / "out",
                         ReplayProvider(write_candidates(tmp_path / "cands", [FASTER])), profiled(not_taken=cut),
                         budget=Budget(max_rounds=1, candidates_per_round=1, max_total_seconds=3600), profile=True)
    assert run.result.report.profile_evidence == ["proton"]  # required of every candidate in this run
    record = run.experiment("r001-c000")
    assert record.decision.status.value == "rejected"
    assert record.decision.reason.startswith("profile veto: profile evidence: not taken for small (budget: the "
                                             "run's time ran out before it; not promoted without it); not taken "
                                             "for large")
    candidate = next(e for e in record.evaluations if e.label == "candidate")
    assert candidate.status is EvaluationStatus.OK and all(c.correct and c.stats for c in candidate.cases)
    assert record.profiles_not_taken == [
        "candidate run, case small: profile not taken: budget (the run's time for it ran out)",
        "candidate run, case large: profile not taken: budget (the run's time for it ran out)"]
    assert any("r001-c000 profile_not_taken=budget" in line for line in run.log_lines)
    # the candidate's run was given until the deadline less the incumbent run still to come after it
    request = next(r for r in run.evaluator.requests if r.tag == "1-candidate")
    assert request.profile_until == pytest.approx(request.deadline - 0.5)
    incumbent = next(r for r in run.evaluator.requests if r.tag == "2-incumbent")
    assert incumbent.role is Role.INCUMBENT and incumbent.profile_level is None


def test_without_required_evidence_a_budget_cut_profile_leaves_the_decision_to_the_measurements(tmp_path):
    cut = {("r001-c000", "1-candidate"), ("final", "1-final")}
    respond = profiled(not_taken=cut)

    def no_profiler_for_the_untouched_kernel(request: Request, cases):
        evaluation = respond(request, cases)
        if request.experiment_id == "baseline":
            for case in evaluation.cases:
                case.profile = None  # no profiler measured it: the run requires no evidence
        return evaluation

    run = run_in_process(PROFILED_BUNDLE, tmp_path / "out",
                         ReplayProvider(write_candidates(tmp_path / "cands", [FASTER])),
                         no_profiler_for_the_untouched_kernel,
                         budget=Budget(max_rounds=1, candidates_per_round=1, max_total_seconds=3600), profile=True)
    assert run.result.report.profile_evidence == []
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "promoted", "final": "revalidated"}
    assert len(run.experiment("r001-c000").profiles_not_taken) == 2


def test_a_profile_missing_for_another_reason_still_vetoes(tmp_path):
    run = run_in_process(PROFILED_BUNDLE, tmp_path / "out",
                         ReplayProvider(write_candidates(tmp_path / "cands", [FASTER])),
                         profiled(failed={("r001-c000", "1-candidate")}),
                         budget=Budget(max_rounds=1, candidates_per_round=1, max_total_seconds=3600), profile=True)
    record = run.experiment("r001-c000")
    assert record.decision.status.value == "rejected" and record.profiles_not_taken == []
    assert "profile evidence: profile missing for small" in record.decision.reason
