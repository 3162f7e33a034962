"""A profile the run's time cuts is not taken; a profile that outlasts its own limits while time remains fails.

Real workers (`run_evaluation`) on the profiled synthetic bundle (tests/e2e/profiled: its profiler takes
`PROFILE_SECONDS` per case), then the real loop in-process (tests/run/fake_evaluator.py) for what the referee makes
of a profile not taken: a correct, faster candidate is promoted on its runs with its profile deferred to its
revalidation, where it meets every veto (how long it takes before its profile is the candidate's to stretch, so
it is never excused, only moved), and a profile missing for any other reason vetoes it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import trio

from orchestrator.decision.simulate import recorded_seed, simulate_run
from orchestrator.ledger.records import load_records
from orchestrator.providers.replay import ReplayProvider
from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import SubprocessSpawner
from protocol.bundle import Budget, load_cases_file, load_target_file
from protocol.profile import ProfileRequest
from protocol.results import Evaluation, EvaluationStatus
from protocol.roles import Role
from tests.conftest import PROJECT_ROOT, synthetic_kernel, write_candidates
from tests.faults.corpus import processes_of_run
from tests.run.fake_evaluator import Request, profiled, recorded, run_in_process

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
    evaluation, seconds = evaluate(tmp_path, SLOW_PROFILE, deadline=120.0, profile_until=12.0)
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
    evaluation, _ = evaluate(tmp_path, SLOW_PROFILE, deadline=12.0, profile_until=600.0)
    assert evaluation.status is EvaluationStatus.TIMEOUT
    assert "timed out in profile (case small)" in evaluation.reason
    assert not any(case.profile_not_taken for case in evaluation.cases)


# ---- the loop: what the referee makes of a profile not taken -----------------------------------------------

FASTER = synthetic_kernel(50.0)
PROFILED_BUNDLE = PROJECT_ROOT / "tests" / "e2e" / "synthetic"


def test_a_candidate_whose_profile_the_budget_cut_is_promoted_and_profiled_at_its_revalidation(tmp_path):
    cut = {("r001-c000", "profile")}
    run = run_in_process(PROFILED_BUNDLE, tmp_path / "out",
                         ReplayProvider(write_candidates(tmp_path / "cands", [FASTER])), profiled(not_taken=cut),
                         budget=Budget(max_rounds=1, candidates_per_round=1, max_total_seconds=3600), profile=True)
    assert run.result.report.profile_evidence == ["proton"]  # required of every candidate in this run
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "promoted", "final": "revalidated"}
    record = run.experiment("r001-c000")
    assert record.profile_deferred and record.decision.gates["profile"] is True
    candidate = next(e for e in record.evaluations if e.label == "candidate")
    assert candidate.status is EvaluationStatus.OK and all(c.correct and c.stats for c in candidate.cases)
    assert record.profiles_not_taken == [
        "profile run, case small: profile not taken: budget (the run's time for it ran out)",
        "profile run, case large: profile not taken: budget (the run's time for it ran out)"]
    assert any("r001-c000 profile_not_taken=budget" in line for line in run.log_lines)
    assert any("r001-c000 profile=deferred reason='its profile run had no time for small, large" in line
               for line in run.log_lines)
    # the candidate's runs are not profiled; its profile, after the verdict, was given until the deadline
    assert [r.profile_level for r in run.evaluator.requests if r.experiment_id == "r001-c000"] == [
        None, None, "summary"]
    request = next(r for r in run.evaluator.requests if r.tag == "profile")
    assert request.role is Role.PROFILE and not request.benchmark and request.profile_until == request.deadline
    # its revalidation's deep-profiled run was judged as a candidate's profile would have been
    assert any("final profile=judged reason='its promotion deferred its profile" in line for line in run.log_lines)
    assert not run.experiment("final").profile_deferred


def test_a_deferred_profile_the_revalidation_cannot_take_either_is_not_revalidated(tmp_path):
    cut = {("r001-c000", "profile"), ("final", "1-final")}
    run = run_in_process(PROFILED_BUNDLE, tmp_path / "out",
                         ReplayProvider(write_candidates(tmp_path / "cands", [FASTER])), profiled(not_taken=cut),
                         budget=Budget(max_rounds=1, candidates_per_round=1, max_total_seconds=3600), profile=True)
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "promoted", "final": "rejected"}
    assert run.experiment("final").decision.reason.startswith(
        "profile veto: profile evidence: not taken for small (budget: the run's time ran out before it; not promoted "
        "without it)")
    assert run.result.winner_experiment_id == "baseline"


def test_without_required_evidence_no_candidate_is_profiled_and_a_budget_cut_one_decides_nothing(tmp_path):
    respond = profiled(not_taken={("final", "1-final")})

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
    # nothing to judge a candidate's profile against: the promoted candidate gets no profile worker
    assert [e.label for e in run.experiment("r001-c000").evaluations] == ["candidate", "incumbent"]
    # the finalist's run brings its profile: given until the deadline less the incumbent run still to come after it
    request = next(r for r in run.evaluator.requests if r.tag == "1-final")
    assert request.profile_level == "deep" and request.profile_until == pytest.approx(request.deadline - 0.5)


def test_a_profile_missing_for_another_reason_still_vetoes(tmp_path):
    run = run_in_process(PROFILED_BUNDLE, tmp_path / "out",
                         ReplayProvider(write_candidates(tmp_path / "cands", [FASTER])),
                         profiled(failed={("r001-c000", "profile")}),
                         budget=Budget(max_rounds=1, candidates_per_round=1, max_total_seconds=3600), profile=True)
    record = run.experiment("r001-c000")
    assert record.decision.status.value == "rejected" and record.profiles_not_taken == []
    assert "profile evidence: profile missing for small" in record.decision.reason


# ---- the loop: only a candidate its runs promote is profiled -----------------------------------------------

SLOWER = synthetic_kernel(150.0)
FASTEST = synthetic_kernel(25.0)


def test_only_a_candidate_promoted_on_its_runs_is_profiled(tmp_path):
    run = run_in_process(PROFILED_BUNDLE, tmp_path / "out",
                         ReplayProvider(write_candidates(tmp_path / "cands", [SLOWER, FASTER, FASTEST])), profiled(),
                         budget=Budget(max_rounds=3, candidates_per_round=1, max_total_seconds=3600), profile=True)
    assert run.result.report.profile_evidence == ["proton"]
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "rejected", "r002-c000": "promoted",
                               "r003-c000": "promoted", "final": "revalidated"}
    slower, faster = run.experiment("r001-c000"), run.experiment("r002-c000")
    assert [e.label for e in slower.evaluations] == ["candidate"]  # triaged: slower on its first run
    assert all(case.profile is None for e in slower.evaluations for case in e.cases)
    assert any(line.endswith("r001-c000 profile=skipped reason='not promoted on its runs: a rejection needs no "
                             "profile'") for line in run.log_lines)
    assert [e.label for e in faster.evaluations] == ["candidate", "incumbent", "profile"]
    assert faster.decision.gates["profile"] is True
    assert [(r.experiment_id, r.tag, r.profile_level, r.benchmark) for r in run.evaluator.requests
            if r.profile_level] == [("baseline", "baseline", "deep", True), ("r002-c000", "profile", "summary", False),
                                    ("r003-c000", "profile", "summary", False), ("final", "1-final", "deep", True)]
    # once promoted, its profile (taken apart from its runs) is what the next candidate's is compared with
    compared = json.loads((run.output_dir / "experiments/r003-c000/profile.json").read_text())
    assert compared["small"]["deltas"]["proton.main_kernel_us"]["incumbent"] == 50.0
    assert compared["small"]["deltas"]["proton.main_kernel_us"]["candidate"] == 25.0
    # `simulate` reads these records (the profile is no run of the decision) and takes the same decisions
    records = load_records(run.output_dir)
    replay = simulate_run(records.experiments, records.cases, settings=records.settings)
    assert replay.all_match and [row.experiment_id for row in replay.experiments] == [
        "r001-c000", "r002-c000", "r003-c000", "final"]
    # and the loop fed these records (each profile answered by the recorded one) takes them again
    seeds = {record.experiment_id: recorded_seed(record.statistics) or 0 for record in records.experiments}
    again = run_in_process(PROFILED_BUNDLE, tmp_path / "again",
                           ReplayProvider(write_candidates(tmp_path / "cands2", [SLOWER, FASTER, FASTEST])),
                           recorded(records.experiments), test_seed=seeds.__getitem__,
                           budget=Budget(max_rounds=3, candidates_per_round=1, max_total_seconds=3600), profile=True)
    assert again.decisions() == run.decisions()
    assert [(r.experiment_id, r.tag) for r in again.evaluator.requests] == [
        (r.experiment_id, r.tag) for r in run.evaluator.requests]
    for record in records.experiments:
        assert again.experiment(record.experiment_id).decision == record.decision
