"""How the run spends its time: a reserve for revalidation, and whether one more candidate fits."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.results import Evaluation, ExperimentRecord
from protocol.roles import Role

PROFILE_MARGIN = 1.5  # a finalist's deep profile against the untouched kernel's (H100, softmax: 27.6 against 24.7 s)


def revalidation_reserve(max_total_seconds: float, baseline: Evaluation) -> float:
    """Seconds kept back from the rounds for the finalist's revalidation, never more than a quarter of the whole
    budget: its three side-by-side runs, each as long as the untouched kernel's run without its profile, one deep
    profile with a margin over the untouched kernel's (the finalist's run brings it), and slack. Counting the
    baseline's profiled wall three times kept 91 s back on softmax for revalidations that took 38 s (H100,
    2026-12-07: 3.5 + 31.1 + 3.6 s), time the rounds could have used. A baseline that recorded no phase times
    is counted whole, three times."""
    profiled = _profile_seconds(baseline)
    unprofiled = max(baseline.worker.wall_seconds - profiled, 0.0)
    return min(max_total_seconds * 0.25, 3 * unprofiled + PROFILE_MARGIN * profiled + 5.0)


FULL_DECISION_RUNS = 3  # the schedule's runs (A/B/A, or B/A/B with triage) of a candidate its first run does not settle


def expected_candidate_seconds(experiments: Sequence[ExperimentRecord],
                               full_decision_runs: int = FULL_DECISION_RUNS) -> float:
    """Worker seconds the next candidate needs for its decision: the runs that decided the last candidate a worker
    measured (A/B/A and confirmation pairs), and never fewer than a full schedule of runs (`full_decision_runs`)
    as long as those: a candidate triage rejected on its first run, or whose first run failed, says what one run
    costs, not what the next candidate's three cost (on an H100 a triaged 5 s candidate made the next one expect 5 s; its third
    run was cut by the run's end). A candidate compile ahead refused before any worker says nothing. Its
    profiles are left out: the summary one is taken after a promoting verdict only, which most candidates never
    reach (a promoted candidate with no time left for its profile defers it to its revalidation), and a deep one
    only when time remains, a deadline that cuts it leaving the verdict as it was (H200, 2026-12-02: a 49 s deep
    profile made the 600 s matmul run expect 112 s and stop with 106 s left; its runs took 62 s). With no
    candidate measured yet, the least any candidate costs: two baseline workers without their profiling (a
    side-by-side needs at least an incumbent run and the candidate's own; the baseline's deep profile says
    little about a candidate). A first candidate that cannot even finish those is cut off halfway (at worker
    start on a loaded host) and decides nothing."""
    for record in reversed(experiments):
        if record.experiment_id == "baseline":
            break
        walls = [e.worker.wall_seconds for e in record.evaluations if _decides(e) and e.worker.wall_seconds > 0]
        if walls:
            return sum(walls) / len(walls) * max(len(walls), full_decision_runs)
    baseline = next((e for e in experiments if e.experiment_id == "baseline"), None)
    walls = [_unprofiled_seconds(e) for e in baseline.evaluations
             if e.label == Role.BASELINE.value] if baseline is not None else []
    return 2 * min(walls) if walls else 0.0


def _decides(evaluation: Evaluation) -> bool:
    try:
        return Role(evaluation.label).decides
    except ValueError:  # a label this version does not know: count it, as before
        return True


def _profile_seconds(evaluation: Evaluation) -> float:
    return sum(case.phase_seconds.get("profile", 0.0) for case in evaluation.cases)


def _unprofiled_seconds(evaluation: Evaluation) -> float:
    return max(evaluation.worker.wall_seconds - _profile_seconds(evaluation), 0.0)


def longest_worker_seconds(evaluations: Sequence[Evaluation]) -> float:
    """The longest worker wall time so far: what one more run of the same experiment is expected to cost."""
    return max((e.worker.wall_seconds or 0.0 for e in evaluations), default=0.0)


def pair_fits(seconds_left: float, runs: Sequence[Evaluation]) -> bool:
    """One more confirmation pair fits when two more runs as long as the longest of the decision so far do."""
    return seconds_left > 0 and seconds_left >= 2 * longest_worker_seconds(runs)


def candidate_fits(seconds_left: float, expected_seconds: float) -> bool:
    """A candidate cut off by the deadline halfway through its A/B/A runs decides nothing and only costs
    time, so the run stops before it instead."""
    return seconds_left > 0 and seconds_left >= expected_seconds


def revalidation_seconds(revalidation: ExperimentRecord, reserve: float) -> float:
    """Worker seconds one more revalidation is expected to take: the runs that decided the last one (the
    finalist's run brings its deep profile), and never less than the run's revalidation reserve (a
    revalidation cut short by a failed run says little of what a full one costs)."""
    return max(sum(e.worker.wall_seconds for e in revalidation.evaluations if _decides(e)), reserve)


def revalidation_fits(seconds_left: float, expected_seconds: float) -> bool:
    """A next-best finalist is revalidated only when a whole revalidation fits in what is left of the run: one
    cut off by the deadline decides nothing (its finalist is rejected), and the run would end later for it."""
    return candidate_fits(seconds_left, expected_seconds)


def profile_seconds_by_case(experiments: Sequence[ExperimentRecord]) -> dict[str, float]:
    """Case id -> the seconds the untouched kernel's profile of it took (its deep profile: at least what a
    candidate's summary takes): a profile is not started with less than that left of the run's time for it."""
    baseline = next((e for e in experiments if e.experiment_id == "baseline"), None)
    if baseline is None or not baseline.evaluations:
        return {}
    return {case.case_id: case.phase_seconds["profile"] for case in baseline.evaluations[0].cases
            if case.phase_seconds.get("profile")}


def profile_cutoff(deadline: float, remaining_runs: int, runs: Sequence[Evaluation]) -> float:
    """Until when a run's profiles may go so that the runs its decision still needs after it fit before the
    deadline (each expected as long as the longest run of the decision so far): a profile cut there is recorded
    as not taken, not as the candidate's timeout (an incumbent run cut by the deadline instead would leave the
    candidate undecided); where evidence is required it still keeps the candidate from promotion."""
    return deadline - max(remaining_runs, 0) * longest_worker_seconds(runs)
