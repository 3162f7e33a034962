"""The sentences a run leaves for a person: why it stopped (result.json `stopping_detail`) and the profile
tokens of live-log lines."""

from __future__ import annotations

from orchestrator.ledger import reporting
from orchestrator.run.state import RunState
from protocol.outcome import StoppingReason
from protocol.results import (
    CaseMeasurement,
    CommitRecord,
    Decision,
    DecisionStatus,
    Evaluation,
    EvaluationStatus,
    ExperimentRecord,
)

# the shape profile_with_kit returns on a GPU where NCU may not run (tests/profiling/ builds the same)
PROTON_ONLY = {
    "level": "summary", "tools": ["proton_launch", "ncu"], "scope": {},
    "proton": {"available": True, "wrapper_us": 1.5, "main_kernel_us": 40.0, "non_main_kernel_us": 0.0},
    "ncu": {"available": False, "summary": {"duration_us": None}},
    "diagnostics": ["ncu: ERR_NVGPUCTRPERM: the user has no permission to access GPU performance counters"],
    "artifacts": {},
}
NOTHING = {
    "level": "summary", "tools": ["proton_launch"], "scope": {}, "ncu": None,
    "proton": {"available": False, "wrapper_us": None, "main_kernel_us": None, "non_main_kernel_us": None},
    "diagnostics": ["proton: no CUDA device (CPU-only machine)"], "artifacts": {},
}


def measured(case_id: str, profile: dict | None) -> CaseMeasurement:
    return CaseMeasurement(case_id=case_id, protected=True, weight=1.0, correct=True, profile=profile)


def test_a_later_stop_replaces_the_reason_and_its_detail_together():
    state = RunState(run_id="r", started=0.0, deadline=10.0)
    state.stop(StoppingReason.PROVIDER_EXHAUSTED, "replay directory exhausted after 2 candidates")
    state.stop(StoppingReason.FINALIST_REVALIDATION_FAILED, "the finalist r001-c000 failed revalidation")
    assert (state.stopping_reason, state.stopping_detail) == (StoppingReason.FINALIST_REVALIDATION_FAILED,
                                                              "the finalist r001-c000 failed revalidation")


def test_time_budget_detail_says_what_the_next_candidate_needed_and_what_was_left():
    assert reporting.time_budget_detail(23.4, -1.0, 170.0) == (
        "the next candidate needs about 23 s of workers and 0 s were left before revalidation "
        "(--max-total-seconds 170); raise --max-total-seconds to try more candidates")


def test_revalidation_detail_names_the_first_failed_gate_and_what_it_suggests():
    gates = {"correct": True, "speedup": True, "cv": False, "noise": False, "profile": True}
    record = ExperimentRecord(experiment_id="final", parent_id="r002-c001", decision=Decision(
        status=DecisionStatus.REJECTED, reason="timing CV 0.2100 exceeds 0.1000 for case large", gates=gates))
    assert reporting.revalidation_detail(record) == (
        "the finalist r002-c001 failed revalidation next to fresh baseline runs at the cv, noise gates (timing CV "
        "0.2100 exceeds 0.1000 for case large), so the baseline stays; its timings were too noisy: run on a quieter "
        "machine or raise --max-cv")


def test_a_finalist_whose_run_did_not_complete_is_not_called_nondeterministic():
    record = ExperimentRecord(experiment_id="final", parent_id="r001-c000", decision=Decision(
        status=DecisionStatus.FAILED, reason="timeout: timed out in benchmark (case large) after 60.0 s",
        gates={"completed": False}))
    detail = reporting.revalidation_detail(record)
    assert detail.startswith("the finalist r001-c000 failed revalidation next to fresh baseline runs at the completed "
                             "gate (timeout: timed out in benchmark (case large) after 60.0 s), so the baseline stays; "
                             "a run ended before it was verified and timed")
    assert "nondeterminism" not in detail


def test_commit_details_carry_the_failed_commits_reason():
    record = ExperimentRecord(experiment_id="r001-c000", source_path="/out/experiments/r001-c000/kernel.py")
    commits = [CommitRecord(status="committed", kind="promotion", experiment_id="r000"),
               CommitRecord(status="failed", kind="promotion", reason="kernel.py changed on disk since the run began")]
    assert reporting.commit_failed_detail(record, commits) == (
        "the checkpoint commit of the promoted r001-c000 failed (kernel.py changed on disk since the run began), so "
        "no further candidate was tried; its source is /out/experiments/r001-c000/kernel.py")
    rollback = [CommitRecord(status="failed", kind="rollback", reason="HEAD moved")]
    assert reporting.rollback_failed_detail("the finalist x failed revalidation", rollback).startswith(
        "the rollback commit failed (HEAD moved) after the finalist x failed revalidation; the checkpoint commits")


def test_case_tokens_keep_figures_and_shorten_only_a_profile_without_any():
    assert reporting.profile_tokens(PROTON_ONLY) == (",proton.wrapper_us=1.5,proton.main_kernel_us=40,"
                                                     "proton.non_main_kernel_us=0,native_profiler=unavailable")
    assert reporting.profile_tokens(NOTHING) == ",profile=unavailable"
    assert reporting.profile_tokens({**NOTHING, "error": "RuntimeError: boom"}) == (
        ",profile=unavailable,profile.error='RuntimeError: boom'")
    assert reporting.profile_tokens(None) == ""


def test_the_baseline_line_says_once_which_profilers_are_missing_and_why():
    baseline = Evaluation(label="baseline", status=EvaluationStatus.OK,
                          cases=[measured("a", NOTHING), measured("b", NOTHING), measured("c", None)])
    line = reporting.evaluation_line("baseline", "baseline", baseline)
    assert line.count("profile=unavailable") == 2
    assert line.endswith(" profiles_unavailable=\"proton on 2/2 case(s), native_profiler on 2/2 case(s): proton: no "
                         "CUDA device (CPU-only machine); native_profiler: not among this target's profile tools "
                         "(proton_launch)\"")
    candidate = baseline.model_copy(update={"label": "candidate"})
    assert "profiles_unavailable" not in reporting.evaluation_line("r001-c000", "candidate", candidate)

    partial = Evaluation(label="baseline", status=EvaluationStatus.OK,
                         cases=[measured("a", PROTON_ONLY), measured("b", PROTON_ONLY)])
    assert reporting.evaluation_line("baseline", "baseline", partial).endswith(
        " profiles_unavailable='native_profiler on 2/2 case(s): ncu: ERR_NVGPUCTRPERM: the user has no permission "
        "to access GPU performance counters'")
    complete = {**PROTON_ONLY, "ncu": {"available": True, "summary": {"duration_us": 39.0}}, "diagnostics": []}
    assert reporting.profile_status(partial.model_copy(
        update={"cases": [measured("a", complete)]})) == ""
