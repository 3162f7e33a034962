"""Whether one more candidate fits the run's time: estimated from what was measured."""

from __future__ import annotations

from orchestrator.decision.time_budget import (
    candidate_fits,
    expected_candidate_seconds,
    profile_cutoff,
    profile_seconds_by_case,
    revalidation_fits,
    revalidation_reserve,
    revalidation_seconds,
)
from protocol.results import (
    CaseMeasurement,
    Decision,
    DecisionStatus,
    Evaluation,
    EvaluationStatus,
    ExperimentRecord,
    WorkerRecord,
)


def _experiment(experiment_id: str, *walls: tuple[str, float]) -> ExperimentRecord:
    return ExperimentRecord(
        experiment_id=experiment_id, source_sha256="0" * 64, normalized_sha256="0" * 64,
        decision=Decision(status=DecisionStatus.BASELINE if experiment_id == "baseline" else DecisionStatus.REJECTED,
                          reason="-"),
        evaluations=[Evaluation(label=label, status=EvaluationStatus.OK, worker=WorkerRecord(wall_seconds=wall))
                     for label, wall in walls])


def test_the_last_measured_candidate_sets_the_estimate():
    experiments = [_experiment("baseline", ("baseline", 9.0)),
                   _experiment("r001-c000", ("incumbent", 2.0), ("candidate", 3.0), ("incumbent", 2.5))]
    assert expected_candidate_seconds(experiments) == 7.5


def test_a_deep_profile_after_the_verdict_is_not_expected_of_the_next_candidate():
    """The 600 s matmul run on the H200 (2026-12-02): 11.6 + 39.9 + 10.9 s of A/B/A and a 49.4 s deep profile;
    the next candidate needs the 62.4 s, so it fits the 106 s that were left."""
    experiments = [_experiment("baseline", ("baseline", 54.3)),
                   _experiment("r001-c001", ("incumbent", 11.6), ("candidate", 39.9), ("incumbent", 10.9),
                               ("deep_profile", 49.4))]
    assert abs(expected_candidate_seconds(experiments) - 62.4) < 1e-9
    assert candidate_fits(106.0, expected_candidate_seconds(experiments))


def test_before_any_candidate_two_unprofiled_baseline_workers_are_the_least_a_candidate_costs():
    experiments = [_experiment("baseline", ("baseline", 13.0), ("deep_profile", 40.0))]
    experiments[0].evaluations[0].cases = [
        CaseMeasurement(case_id=case_id, protected=True, weight=1.0, phase_seconds={"verify": 0.5, "benchmark": 1.0, "profile": 5.0})
        for case_id in ("small", "large")]
    assert expected_candidate_seconds(experiments) == 6.0
    # so a first candidate that could not even finish those never starts
    assert not candidate_fits(5.0, expected_candidate_seconds(experiments))
    assert candidate_fits(6.5, expected_candidate_seconds(experiments))


def test_with_nothing_measured_the_estimate_is_zero_and_only_the_clock_decides():
    assert expected_candidate_seconds([]) == 0.0
    assert candidate_fits(0.1, 0.0) and not candidate_fits(0.0, 0.0)


def test_a_next_best_revalidation_is_expected_to_cost_what_the_failed_one_did_at_least_the_reserve():
    failed = _experiment("final", ("incumbent", 11.0), ("final", 60.0), ("incumbent", 10.0))
    assert revalidation_seconds(failed, reserve=40.0) == 81.0
    cut_short = _experiment("final", ("incumbent", 11.0), ("final", 2.0))  # an incorrect finalist ends early
    assert revalidation_seconds(cut_short, reserve=40.0) == 40.0
    assert revalidation_fits(81.0, 81.0) and not revalidation_fits(80.0, 81.0)


def test_the_reserve_counts_the_profile_once_and_the_runs_without_it_three_times():
    """Softmax on an H100 (2026-12-07): a 28.7 s baseline of which 24.7 s profiled; its revalidation took
    3.5 + 31.1 + 3.6 s. The reserve covers that with room (54 s), not three profiled baselines (91 s)."""
    baseline = _experiment("baseline", ("baseline", 28.7)).evaluations[0]
    baseline.cases = [CaseMeasurement(case_id=case_id, protected=True, weight=1.0, phase_seconds={"profile": profile})
                      for case_id, profile in (("large", 14.7), ("small", 10.0))]
    reserve = revalidation_reserve(600.0, baseline)
    assert 3.5 + 31.1 + 3.6 < reserve < 3 * 28.7 + 5.0
    assert abs(reserve - (3 * 4.0 + 1.5 * 24.7 + 5.0)) < 1e-9
    assert revalidation_reserve(100.0, baseline) == 25.0  # never more than a quarter of the budget
    unphased = _experiment("baseline", ("baseline", 10.0)).evaluations[0]  # no phase times: counted whole
    assert revalidation_reserve(600.0, unphased) == 35.0


def test_a_profile_leaves_time_for_the_runs_its_decision_still_needs():
    """The candidate's run of an A/B/A: the last incumbent run (as long as the longest run so far) must fit."""
    runs = [Evaluation(label="incumbent", status=EvaluationStatus.OK, worker=WorkerRecord(wall_seconds=12.0))]
    assert profile_cutoff(1000.0, 1, runs) == 988.0
    assert profile_cutoff(1000.0, 0, runs) == 1000.0  # nothing after it: until the deadline
    baseline = _experiment("baseline", ("baseline", 50.0))
    baseline.evaluations[0].cases = [CaseMeasurement(case_id="n16M", protected=True, weight=1.0,
                                                     phase_seconds={"profile": 21.5}),
                                     CaseMeasurement(case_id="n64M", protected=True, weight=1.0)]
    assert profile_seconds_by_case([baseline]) == {"n16M": 21.5}
    assert profile_seconds_by_case([]) == {}


def test_a_triaged_or_refused_candidate_does_not_shrink_the_estimate_below_a_full_schedule():
    """On an H100 a softmax candidate triage rejected on its one 5.0 s run made the next one expect 5 s; that
    one's third run was cut by the run's end. One run says what a run costs: the next candidate is expected to
    need three. A candidate compile ahead refused (a record with no worker run) says nothing."""
    measured = _experiment("r002-c000", ("candidate", 5.0))
    assert expected_candidate_seconds([_experiment("baseline", ("baseline", 9.0)), measured]) == 15.0
    refused = _experiment("r003-c000", ("candidate", 0.0))
    assert expected_candidate_seconds([_experiment("baseline", ("baseline", 9.0)), measured, refused]) == 15.0
    confirmed = _experiment("r004-c000", *[("candidate", 4.0), ("incumbent", 4.0)] * 2, ("candidate", 4.0))
    assert expected_candidate_seconds([measured, confirmed]) == 20.0  # five runs: all of them
