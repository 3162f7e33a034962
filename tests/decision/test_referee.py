"""The referee as a state machine: what it asks for, in what order, and the ruling it gives, fed by hand.

The decision sequence itself (gates, noise, confirmation) is tested with real figures in test_promotion.py,
test_confirmation.py and test_case_regression.py; the live loop and `simulate` are both its drivers
(tests/run/test_loop_in_process.py shows them agree on recorded runs)."""

from __future__ import annotations

import math
import random

import pytest

from orchestrator.decision.evidence import Evidence
from orchestrator.decision.noise import BetweenRunNoise, RunMedians
from orchestrator.decision.referee import Measure, NoiseRule, Profile, Referee, Rules, Ruling
from orchestrator.decision.statistics import sample_stats
from protocol.bundle import Budget, Case
from protocol.results import CaseMeasurement, DecisionStatus, Evaluation, EvaluationStatus
from protocol.roles import Role

CASE = Case(case_id="c")
FAST, SLOW = 80.0, 100.0


def run(label: str, median_us: float, seed: int, profile: dict | None = None,
        status: EvaluationStatus = EvaluationStatus.OK) -> Evaluation:
    rng = random.Random(seed)
    samples = [median_us * (1.0 + rng.gauss(0.0, 0.002)) for _ in range(30)]
    measured = CaseMeasurement(case_id="c", protected=True, weight=1.0, correct=True, samples_us=samples,
                               stats=sample_stats(samples), profile=profile)
    return Evaluation(label=label, status=status, cases=[measured] if status is EvaluationStatus.OK else [],
                      reason="" if status is EvaluationStatus.OK else "worker exited with -11")


def proton(us: float) -> dict:
    return {"proton": {"available": True, "total_kernel_us": us, "main_kernel_us": us, "non_main_kernel_us": 0.0}}


def referee(**rules: object) -> Referee:
    return Referee(Rules(cases=(CASE,), budget=Budget(), **rules))


def open_candidate(judge: Referee, role: Role = Role.CANDIDATE, **inputs: object):
    return judge.start(role=role, test_seed=3, history=RunMedians(), digests=("new", "old"), **inputs)


def drive(judge: Referee, state, candidate_us: float = FAST, seconds_left: float = math.inf,
          candidate_profile: dict | None = None, deep_profile: dict | None = None,
          recorded_profile: dict | None = None, profile_run=None,
          seconds_after_profile: float | None = None) -> tuple[Ruling, list]:
    """Answer every action as a worker would; returns the ruling and the actions asked for. `candidate_profile`:
    what a profile of the candidate brings (its run's where the run is profiled, the finalist's, else its
    profile after the verdict); `recorded_profile`: what every candidate run brings, as runs recorded before
    profiles were taken after the verdict did; `profile_run`: the evaluation a summary profile answers with."""
    asked = []
    while not isinstance(action := judge.next(state), Ruling):
        asked.append(action)
        if isinstance(action, Profile):
            left = seconds_left if seconds_after_profile is None else seconds_after_profile
            profile = candidate_profile if action.role is Role.PROFILE else deep_profile
            answer = profile_run if profile_run is not None and action.role is Role.PROFILE \
                else run(action.role.value, candidate_us, len(asked), profile)
            state = judge.profiled(state, answer, left)
            continue
        us = candidate_us if action.side == "candidate" else SLOW
        if action.side == "incumbent":
            profile = None
        else:
            profile = candidate_profile if action.profile_level else recorded_profile
        state = judge.measured(state, run(action.role.value, us, len(asked), profile), seconds_left)
    return action, asked


def test_a_clear_gain_is_measured_in_the_schedule_order_and_promoted():
    judge = referee()
    ruling, asked = drive(judge, open_candidate(judge))
    assert [(a.side, a.role, a.index, a.profile_level, a.pair) for a in asked] == [
        ("incumbent", Role.INCUMBENT, 0, None, 0), ("candidate", Role.CANDIDATE, 1, None, 0),
        ("incumbent", Role.INCUMBENT, 2, None, 0)]
    assert ruling.promoted and ruling.decision.status is DecisionStatus.PROMOTED and ruling.pairs == 0
    assert [e.label for e in ruling.evaluations] == ["incumbent", "candidate", "incumbent"]
    # the decision's runs join the history under their sources' digests: two of the old one, one of the new
    assert [digest for digest, _case, _median in ruling.history.runs] == ["old", "new", "old"]


def test_the_schedule_is_the_runs_and_a_failed_candidate_run_ends_it():
    judge = referee(schedule=("candidate", "incumbent", "incumbent", "candidate"))
    _ruling, asked = drive(judge, open_candidate(judge))
    assert [a.side for a in asked] == ["candidate", "incumbent", "incumbent", "candidate"]
    state = open_candidate(referee())
    state = referee().measured(state, run("incumbent", SLOW, 1), math.inf)
    state = referee().measured(state, run("candidate", FAST, 2, status=EvaluationStatus.CRASHED), math.inf)
    ruling = referee().next(state)
    assert isinstance(ruling, Ruling) and len(ruling.runs) == 2  # the second incumbent run would decide nothing
    assert ruling.verdict.decision.status is DecisionStatus.FAILED and not ruling.promoted


def test_every_state_is_a_new_value_and_a_run_out_of_turn_is_refused():
    judge = referee()
    opened = open_candidate(judge)
    after = judge.measured(opened, run("incumbent", SLOW, 1), math.inf)
    assert opened.runs == () and isinstance(judge.next(opened), Measure) and judge.next(opened).index == 0
    assert judge.next(after).side == "candidate" and len(after.runs) == 1
    with pytest.raises(ValueError, match="a candidate run was asked for, got a 'incumbent' one"):
        judge.measured(after, run("incumbent", SLOW, 2), math.inf)
    with pytest.raises(ValueError, match="no profile was asked for"):
        judge.profiled(after, run("deep_profile", FAST, 2), math.inf)
    with pytest.raises(ValueError, match="decides candidates and finalists"):
        judge.start(role=Role.INCUMBENT, test_seed=0, history=RunMedians(), digests=("a", "b"))


def test_a_finalist_is_measured_with_a_deep_profile_and_revalidated_or_rejected():
    judge = referee()
    ruling, asked = drive(judge, open_candidate(judge, Role.FINAL))
    assert [(a.role, a.profile_level) for a in asked if a.side == "candidate"] == [(Role.FINAL, "deep")]
    assert ruling.decision.status is DecisionStatus.REVALIDATED
    slower, _ = drive(judge, open_candidate(judge, Role.FINAL), candidate_us=SLOW * 1.2)
    assert slower.decision.status is DecisionStatus.REJECTED and slower.decision.reason.startswith("speedup 0.83")


def test_a_finalist_without_the_required_evidence_is_rejected():
    judge = referee()
    missing, _ = drive(judge, open_candidate(judge, Role.FINAL, evidence=Evidence(required=("proton",))))
    assert missing.decision.status is DecisionStatus.REJECTED
    assert missing.decision.reason == "profile veto: profile evidence: profile missing for c: Proton (no profile came back)"
    brought, _ = drive(judge, open_candidate(judge, Role.FINAL, evidence=Evidence(required=("proton",))),
                       candidate_profile=proton(FAST))
    assert brought.decision.status is DecisionStatus.REVALIDATED


def test_near_the_threshold_a_deep_profile_is_asked_for_and_its_ncu_regression_vetoes():
    evidence = Evidence(incumbent_profiles={"c": {"ncu": {"summary": {"duration_us": 100.0}}}})
    judge = referee(noise=NoiseRule(given=BetweenRunNoise(floor=0.0005)))
    near = SLOW / 1.012  # 1.012x: within a point of the 1.01x threshold
    ruling, asked = drive(judge, open_candidate(judge, evidence=evidence), candidate_us=near,
                          deep_profile={"ncu": {"summary": {"duration_us": 103.0}}})
    [summary, deep] = [a for a in asked if isinstance(a, Profile)]
    assert (summary.level, summary.role) == ("summary", Role.PROFILE)
    assert (deep.level, deep.role) == ("deep", Role.DEEP_PROFILE)
    assert deep.reasons == ("near_threshold",) and deep.notes == ("deep_profile=taken reasons=near_threshold",)
    assert ruling.deep_profile is not None
    assert [e.label for e in ruling.evaluations][-2:] == ["profile", "deep_profile"]
    assert ruling.verdict.decision.gates["profile"] is False and ruling.decision.status is DecisionStatus.REJECTED
    assert ruling.decision.reason.startswith("profile veto: ncu duration regressed: candidate 103.000us")
    assert ruling.verdicts[0].decision.status is DecisionStatus.PROMOTED  # what the benchmark alone said
    assert ruling.profiles["c"].profile == {"ncu": {"summary": {"duration_us": 103.0}}}
    # no time left after the summary profile: the deep profile is skipped, and the summary evidence decides
    cut, asked = drive(judge, open_candidate(judge, evidence=evidence), candidate_us=near, seconds_after_profile=0.0)
    assert [a.role for a in asked if isinstance(a, Profile)] == [Role.PROFILE] and cut.promoted
    assert cut.notes[-1].startswith("deep_profile=skipped reason=")
    # profiling off: no evidence judged, no profile compared
    off, asked = drive(judge, open_candidate(judge), candidate_us=near)
    assert off.profiles is None and off.promoted and not any(isinstance(a, Profile) for a in asked)


def test_a_replay_carries_the_recorded_veto_and_noise_gate():
    judge = referee()
    vetoed, _ = drive(judge, open_candidate(judge, carried_veto="ncu duration regressed"))
    assert vetoed.decision.reason == "profile veto: ncu duration regressed" and not vetoed.promoted
    held, _ = drive(judge, open_candidate(judge, carried_noise_gate=False))
    assert held.verdict.decision.gates["noise"] is False and held.verdict.decision.reason == ""
    # the carried gate holds however many runs come: each pair is decided again with it
    assert held.pairs == 2 and [v.decision.gates["noise"] for v in held.verdicts] == [False, False, False]


# ---- the candidate's profile: taken after a promoting verdict only ---------------------------------------------

REQUIRED = Evidence(required=("proton",))


def test_a_rejected_candidate_is_never_profiled():
    judge = referee()
    ruling, asked = drive(judge, open_candidate(judge, evidence=REQUIRED), candidate_us=SLOW * 1.03,
                          candidate_profile=proton(SLOW * 1.03))
    assert not any(isinstance(a, Profile) for a in asked)
    assert [a.profile_level for a in asked] == [None, None, None]
    assert ruling.decision.status is DecisionStatus.REJECTED and ruling.decision.reason.startswith("speedup 0.97")
    assert ruling.profile is None and [e.label for e in ruling.evaluations] == ["incumbent", "candidate", "incumbent"]
    assert ruling.notes[-1] == "profile=skipped reason='not promoted on its runs: a rejection needs no profile'"
    assert ruling.profiles is None  # nothing compared: no profile was taken


def test_a_promoted_candidate_is_profiled_once_and_promoted_when_its_profile_agrees():
    judge = referee()
    ruling, asked = drive(judge, open_candidate(judge, evidence=REQUIRED), candidate_profile=proton(FAST))
    [profile] = [a for a in asked if isinstance(a, Profile)]
    assert (profile.level, profile.role) == ("summary", Role.PROFILE)
    assert profile.notes == ("profile=taken reason='promoted on its runs: its profile is the evidence'",)
    assert all(a.profile_level is None for a in asked if isinstance(a, Measure))
    assert ruling.promoted and ruling.verdict.decision.gates["profile"] is True
    assert [e.label for e in ruling.evaluations] == ["incumbent", "candidate", "incumbent", "profile"]
    assert ruling.profile is ruling.evaluations[-1] and ruling.profiles["c"].profile == proton(FAST)


DEFERRED = "profile=deferred reason="


def test_a_profile_run_the_runs_end_cuts_defers_the_profile_to_the_revalidation():
    """On an H100 a 1.42x softmax candidate's profile worker timed out in verify when the run's time ran out, and
    it was not promoted: its profile owed nothing to the candidate. It is now promoted on its runs with its
    profile deferred to its revalidation. A profile run that times out with time still left is the candidate's
    own failure."""
    judge = referee()
    timed_out = Evaluation(label="profile", status=EvaluationStatus.TIMEOUT, cases=[],
                           reason="timed out in verify (case c) after 1.2 s")
    cut, _ = drive(judge, open_candidate(judge, evidence=REQUIRED), profile_run=timed_out, seconds_after_profile=0.0)
    assert cut.promoted and cut.profile_deferred and cut.verdict.decision.gates["profile"] is True
    assert cut.notes[-1].startswith(DEFERRED + "\"the run's time ran out during its profile run (timed out in verify")
    assert [e.label for e in cut.evaluations][-1] == "profile"  # the cut run stays in the record
    failed, _ = drive(judge, open_candidate(judge, evidence=REQUIRED), profile_run=timed_out,
                      seconds_after_profile=120.0)
    assert not failed.promoted and not failed.profile_deferred
    assert failed.decision.reason.startswith("profile veto: the candidate's profile run ended timeout")


def test_a_promoted_candidate_whose_profile_disagrees_with_its_benchmark_is_not_promoted():
    judge = referee()
    ruling, _ = drive(judge, open_candidate(judge, evidence=REQUIRED), candidate_profile=proton(FAST / 3))
    benchmark = ruling.verdicts[0].comparisons[0].candidate_median_us
    assert ruling.verdicts[0].decision.status is DecisionStatus.PROMOTED  # what the runs alone said
    assert not ruling.promoted and ruling.verdict.decision.gates["profile"] is False
    assert ruling.decision.reason == (f"profile veto: profile evidence: c: Proton {FAST / 3:.1f} us vs benchmark "
                                      f"{benchmark:.1f} us (they must agree within 1.5x + 2 us on the same inputs, "
                                      "poison and flush)")


def test_a_promoted_candidate_without_its_profile_is_not_promoted():
    judge = referee()
    missing, _ = drive(judge, open_candidate(judge, evidence=REQUIRED), candidate_profile=None)
    assert not missing.promoted and not missing.profile_deferred
    assert missing.decision.reason == "profile veto: profile evidence: profile missing for c: Proton (no profile came back)"


def test_a_profile_the_runs_time_does_not_allow_is_deferred_not_failed():
    judge = referee()
    # the profile worker had no time for a protected case: deferred, the candidate promoted on its runs
    cut_run = run(Role.PROFILE.value, FAST, 9)
    cut_run.cases[0].profile_not_taken = "budget"
    cut, _ = drive(judge, open_candidate(judge, evidence=REQUIRED), profile_run=cut_run)
    assert cut.promoted and cut.profile_deferred
    assert cut.notes[-1].startswith(DEFERRED + "'its profile run had no time for c: promoted on its runs")
    # no time left for it at all, or less than a profile takes: not asked for, deferred
    for left, why in ((0.0, "no time left before the deadline"),
                      (20.0, "20 s left before the deadline, a profile takes about 35 s")):
        unfit, asked = drive(judge, open_candidate(judge, evidence=REQUIRED, profile_seconds=35.0), seconds_left=left)
        assert not any(isinstance(a, Profile) for a in asked)
        assert unfit.promoted and unfit.profile_deferred and unfit.notes[-1].startswith(f"{DEFERRED}'{why}:")
    # with the time a profile takes, it is taken
    fits, asked = drive(judge, open_candidate(judge, evidence=REQUIRED, profile_seconds=35.0), seconds_left=40.0,
                        candidate_profile=proton(FAST))
    assert any(isinstance(a, Profile) for a in asked) and fits.promoted and not fits.profile_deferred
    # a rejected candidate defers nothing
    slow, _ = drive(judge, open_candidate(judge, evidence=REQUIRED, profile_seconds=35.0), seconds_left=0.0,
                    candidate_us=SLOW * 1.03)
    assert not slow.promoted and not slow.profile_deferred
    with pytest.raises(ValueError, match="only a finalist"):
        open_candidate(judge, profile_deferred=True)


def test_a_finalist_whose_profile_was_deferred_is_held_to_every_veto():
    """Held to the required evidence alone, a finalist passes with any agreeing profile; one whose promotion
    deferred its profile meets the candidate's vetoes there, against the untouched kernel's profile."""
    judge = referee()
    ncu = {"ncu": {"available": True, "duration_us": FAST * 1.05}}
    theirs = Evidence(required=("proton",), incumbent_profiles={"c": {"ncu": {"available": True,
                                                                          "duration_us": FAST}}})
    regressed = {**proton(FAST), **ncu}
    plain, _ = drive(judge, open_candidate(judge, Role.FINAL, evidence=theirs), candidate_profile=regressed)
    assert plain.promoted and plain.decision.status is DecisionStatus.REVALIDATED
    deferred, asked = drive(judge, open_candidate(judge, Role.FINAL, evidence=theirs, profile_deferred=True),
                            candidate_profile=regressed)
    assert not any(isinstance(a, Profile) for a in asked)  # its deep-profiled run is the evidence
    assert deferred.decision.status is DecisionStatus.REJECTED and not deferred.profile_deferred
    assert deferred.decision.reason.startswith("profile veto: ncu duration regressed")
    assert deferred.notes[0].startswith("profile=judged reason='its promotion deferred its profile")
    agreed, _ = drive(judge, open_candidate(judge, Role.FINAL, evidence=theirs, profile_deferred=True),
                      candidate_profile={**proton(FAST), "ncu": {"available": True, "duration_us": FAST * 0.9}})
    assert agreed.decision.status is DecisionStatus.REVALIDATED
    # a finalist whose revalidation could not profile it either is not revalidated
    missing, _ = drive(judge, open_candidate(judge, Role.FINAL, evidence=theirs, profile_deferred=True),
                       candidate_profile=None)
    assert missing.decision.status is DecisionStatus.REJECTED and "profile missing for c" in missing.decision.reason


def test_a_profile_run_that_fails_keeps_the_candidate_from_promotion():
    judge = referee()
    crashed = run(Role.PROFILE.value, FAST, 9, status=EvaluationStatus.CRASHED)
    ruling, _ = drive(judge, open_candidate(judge, evidence=Evidence()), profile_run=crashed)
    assert not ruling.promoted
    assert ruling.decision.reason == "profile veto: the candidate's profile run ended crashed: worker exited with -11"


def test_a_candidate_run_recorded_with_its_profiles_is_judged_on_them_and_asks_for_none():
    judge = referee()
    agreed, asked = drive(judge, open_candidate(judge, evidence=REQUIRED), recorded_profile=proton(FAST))
    assert not any(isinstance(a, Profile) for a in asked) and agreed.promoted
    assert agreed.profile is None and agreed.profiles["c"].profile == proton(FAST)
    disagreed, asked = drive(judge, open_candidate(judge, evidence=REQUIRED), recorded_profile=proton(FAST / 3))
    assert not any(isinstance(a, Profile) for a in asked) and not disagreed.promoted
    assert disagreed.decision.reason.startswith(f"profile veto: profile evidence: c: Proton {FAST / 3:.1f} us vs")
    # a slower one recorded with its profiles is judged on them too, as it was: the deep-profile call says why not
    slower, asked = drive(judge, open_candidate(judge, evidence=REQUIRED), candidate_us=SLOW * 1.03,
                          recorded_profile=proton(SLOW * 1.03))
    assert not any(isinstance(a, Profile) for a in asked) and not slower.promoted
    assert slower.notes[-1] == "deep_profile=skipped reason='clearly below the threshold'"
    assert slower.profiles is not None


# ---- triage: the candidate first, against the incumbent's last run ------------------------------------------

def history_with(digest: str, median_us: float) -> RunMedians:
    return RunMedians().with_run(digest, run("incumbent", median_us, 99))


def test_triage_rejects_a_clear_loser_on_its_first_run_and_measures_no_incumbent():
    judge = referee(triage=True)
    state = judge.start(role=Role.CANDIDATE, test_seed=3, history=history_with("old", SLOW), digests=("new", "old"))
    ruling, asked = drive(judge, state, candidate_us=SLOW * 1.10)
    assert [(a.side, a.index) for a in asked] == [("candidate", 0)]
    assert ruling.decision.status is DecisionStatus.REJECTED
    assert ruling.decision.gates == {"correct": True, "speedup": False, "case_regression": False, "triage": False}
    assert ruling.verdict.triage["slower_cases"] == ["c"]
    assert ruling.decision.reason.startswith("triaged on its first run")
    assert ruling.verdict.aggregate_speedup == pytest.approx(1 / 1.10, rel=0.01)
    assert ruling.verdict.test is None  # one run decides no test: triage never promotes
    assert len(ruling.history.runs) == 2  # the candidate's run joins the history as any run does


def test_triage_lets_through_what_the_full_schedule_could_promote_and_measures_it_b_a_b():
    judge = referee(triage=True)
    for candidate_us, promoted in ((FAST, True), (SLOW * 1.01, False)):  # a gain; a loss inside the margin
        state = judge.start(role=Role.CANDIDATE, test_seed=3, history=history_with("old", SLOW),
                            digests=("new", "old"))
        ruling, asked = drive(judge, state, candidate_us=candidate_us)
        assert [(a.side, a.index) for a in asked[:3]] == [("candidate", 0), ("incumbent", 1), ("candidate", 2)]
        assert ruling.promoted is promoted and "triage" not in ruling.decision.gates


def test_without_an_incumbent_run_or_for_the_finalist_triage_keeps_the_schedule():
    judge = referee(triage=True)
    for role, history in ((Role.CANDIDATE, RunMedians()), (Role.FINAL, history_with("old", SLOW))):
        state = judge.start(role=role, test_seed=3, history=history, digests=("new", "old"))
        ruling, asked = drive(judge, state, candidate_us=SLOW * 1.10)
        assert [a.side for a in asked[:3]] == ["incumbent", "candidate", "incumbent"]
        assert "triage" not in ruling.decision.gates


def test_a_failed_first_run_ends_a_triaged_decision_at_one_worker():
    judge = referee(triage=True)
    state = judge.start(role=Role.CANDIDATE, test_seed=3, history=history_with("old", SLOW), digests=("new", "old"))
    state = judge.measured(state, run("candidate", FAST, 1, status=EvaluationStatus.CRASHED), math.inf)
    ruling = judge.next(state)
    assert isinstance(ruling, Ruling) and ruling.decision.status is DecisionStatus.FAILED
    assert [e.label for e in ruling.runs] == ["candidate"]


# ---- the incumbent's last run reused as the first A of the A/B/A ---------------------------------------------

def test_reuse_decides_on_the_incumbent_last_run_and_two_new_workers():
    judge = referee(triage=True, reuse_incumbent_run=True)
    history = history_with("old", SLOW * 1.02)  # the reused run; the new incumbent run measures SLOW
    for candidate_us, promoted in ((FAST, True), (SLOW * 1.01, False)):  # a gain; a loss inside triage's margin
        state = judge.start(role=Role.CANDIDATE, test_seed=3, history=history, digests=("new", "old"))
        ruling, asked = drive(judge, state, candidate_us=candidate_us)
        assert [(a.side, a.index) for a in asked if isinstance(a, Measure)][:2] == [("candidate", 0), ("incumbent", 1)]
        assert asked[0].notes == ("status=reusing the incumbent's last run as the first of its A/B/A",)
        assert ruling.promoted is promoted and "triage" not in ruling.decision.gates
        assert ruling.reused_incumbent is history.last_evaluation("old")
        assert [e.label for e in ruling.runs[:2]] == ["candidate", "incumbent"]  # the reused run is not this one's
        # decided on both incumbent runs: the geometric mean of their medians
        assert ruling.verdict.comparisons[0].incumbent_median_us == pytest.approx(SLOW * math.sqrt(1.02), rel=0.003)
        # the history gains this decision's runs only: the reused run is in it once
        assert len(ruling.history.runs) == 1 + len(ruling.runs)


def test_reuse_still_triages_a_clear_loser_on_one_worker():
    judge = referee(triage=True, reuse_incumbent_run=True)
    state = judge.start(role=Role.CANDIDATE, test_seed=3, history=history_with("old", SLOW), digests=("new", "old"))
    ruling, asked = drive(judge, state, candidate_us=SLOW * 1.10)
    assert [(a.side, a.index) for a in asked] == [("candidate", 0)]
    assert ruling.decision.gates["triage"] is False


def test_an_incumbent_run_that_is_not_whole_is_not_reused():
    judge = referee(triage=True, reuse_incumbent_run=True)
    incorrect = run("incumbent", SLOW, 99)
    incorrect.cases[0].correct = False  # timed, so it is the last run triage compares with, but not correct
    history = RunMedians().with_run("old", run("incumbent", SLOW, 98)).with_run("old", incorrect)
    state = judge.start(role=Role.CANDIDATE, test_seed=3, history=history, digests=("new", "old"))
    ruling, asked = drive(judge, state)
    assert [a.side for a in asked[:3]] == ["candidate", "incumbent", "candidate"]
    assert ruling.reused_incumbent is None and ruling.promoted


def test_without_triage_or_for_the_finalist_nothing_is_reused():
    for rules, role in (({"triage": False, "reuse_incumbent_run": True}, Role.CANDIDATE),
                        ({"triage": True, "reuse_incumbent_run": True}, Role.FINAL)):
        judge = referee(**rules)
        state = judge.start(role=role, test_seed=3, history=history_with("old", SLOW), digests=("new", "old"))
        ruling, asked = drive(judge, state)
        assert [a.side for a in asked[:3]] == ["incumbent", "candidate", "incumbent"]
        assert ruling.reused_incumbent is None
