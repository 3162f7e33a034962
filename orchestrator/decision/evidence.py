"""A candidate's profile evidence, judged: when to take a deep profile, and the veto its profiles give.

The rules themselves are `profile_rules`; this module applies them to one decision: the candidate's summary
profiles (taken after a promoting verdict, or brought by its run in records made before that), and a deep profile
when one was taken, against the incumbent's, the cross-checks of each protected case's benchmark speedup against
the profilers' kernel times, and the evidence every candidate must bring (the profilers that measured the
untouched kernel in this run). Pure: the referee (`referee.py`) calls it, the run writes what it returns
(profile.json, the live log).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.decision import profile_rules
from orchestrator.decision.gates import Verdict
from protocol.bundle import Case
from protocol.profile import CaseProfileComparison
from protocol.results import Evaluation, EvaluationStatus

NO_DEEP_PROFILE_NEEDED = "summary evidence is sufficient (not near the threshold, no disagreement, no stagnation)"
PROFILE_FOR_PROMOTION = "promoted on its runs: its profile is the evidence"
NO_PROFILE_FOR_REJECTION = "not promoted on its runs: a rejection needs no profile"
DEFERRED_PROFILE_JUDGED = ("profile=judged reason='its promotion deferred its profile: this deep-profiled run is held "
                           "to every candidate veto, against the untouched kernel'")


def profiles_by_case(evaluation: Evaluation | None) -> dict[str, Any]:
    """Case id -> the profile the worker brought back for it (None where it brought none)."""
    if evaluation is None:
        return {}
    return {m.case_id: m.profile for m in evaluation.cases}


def carries_profiles(evaluation: Evaluation) -> bool:
    """The run brought profiles (or was refused one by the run's time): a candidate's run recorded before its
    profile was taken after the verdict. Its profiles are then the evidence, as they were when it was decided."""
    return any(case.profile is not None or case.profile_not_taken for case in evaluation.cases)


def profiled_run(run: Evaluation, profile: Evaluation | None) -> Evaluation:
    """The run with each case's profile from `profile` (taken apart from it) where the run brought none: what a
    promoted candidate's profiles are compared with once it is the incumbent."""
    if profile is None:
        return run
    taken = profiles_by_case(profile)
    cases = [case.model_copy(update={"profile": taken.get(case.case_id)}) if case.profile is None else case
             for case in run.cases]
    return run.model_copy(update={"cases": cases})


def profile_line(taken: bool, why: str) -> str:
    return f"profile={'taken' if taken else 'skipped'} reason={why!r}"


@dataclass(frozen=True)
class Evidence:
    """What a decision's profile evidence is judged with; a decision without one judges no profile (profiling
    off). `required`: the profilers every candidate must bring for every protected case; the rest is read for a
    candidate only (the finalist is held to the required evidence alone)."""

    required: tuple[str, ...] = ()
    incumbent_profiles: Mapping[str, Any] = field(default_factory=dict)  # case id -> the incumbent's own profile
    check_main_scope: bool = False  # work moved out of the target's `main_scope` vetoes
    rounds_without_promotion: int = 0


@dataclass(frozen=True)
class DeepProfileCall:
    """Whether the evidence calls for a deep profile, and why (the reasons and the disagreements it saw)."""

    reasons: tuple[str, ...]
    disagreements: tuple[str, ...]
    cross_checks: tuple[str, ...]  # the vetoes of the benchmark against the profilers, in case order (first wins)

    def taken_line(self) -> str:
        return (f"deep_profile=taken reasons={','.join(self.reasons)}"
                + (f" disagreement={'; '.join(self.disagreements)!r}" if self.disagreements else ""))


def deep_profile_call(cases: Sequence[Case], evidence: Evidence, candidate: Evaluation, verdict: Verdict,
                      min_speedup: float) -> DeepProfileCall:
    """The summary evidence read against the benchmark: disagreements between the timers, cross-checks of each
    protected case, and the reasons for a deep profile (near the threshold, disagreement, stagnation)."""
    candidate_profiles = profiles_by_case(candidate)
    disagreements, cross_checks = [], []
    for case in cases:
        case_id = case.case_id
        row = next((r for r in verdict.comparisons if r.case_id == case_id), None)
        mine, theirs = candidate_profiles.get(case_id), evidence.incumbent_profiles.get(case_id)
        times = profile_rules.kernel_times(mine, theirs)
        speeds = {tool: paired.speedup for tool, paired in times.items()}
        benchmark = profile_rules.PairedTimes(row.incumbent_median_us, row.candidate_median_us) if row and row.speedup \
            else profile_rules.PairedTimes(None, None)
        text = profile_rules.measurements_disagree({"benchmark": benchmark, **times})
        if text:
            disagreements.append(f"{case_id}: {text}")
        if case.protected:
            backing = {**speeds, "proton_all_kernels": profile_rules.gpu_time_speedup(mine, theirs)}
            cross_checks.append(profile_rules.unbacked_speedup_veto(case_id, row.speedup if row else None, backing))
            if evidence.check_main_scope:
                cross_checks.append(profile_rules.outside_main_scope_veto(case_id, mine, theirs))
    reasons = profile_rules.deep_profile_reasons(
        is_baseline=False, is_finalist=False, correct=verdict.decision.gates.get("correct", False),
        speedup=verdict.aggregate_speedup, min_speedup=min_speedup,
        rounds_without_promotion=evidence.rounds_without_promotion, disagreement="; ".join(disagreements) or None)
    return DeepProfileCall(tuple(reasons), tuple(disagreements), tuple(text for text in cross_checks if text))


def deep_profile_skipped_line(verdict: Verdict, min_speedup: float) -> str:
    why = ("clearly below the threshold" if profile_rules.clearly_slow(verdict.aggregate_speedup, min_speedup)
           else NO_DEEP_PROFILE_NEEDED)
    return f"deep_profile=skipped reason={why!r}"


def compare_profiles(cases: Sequence[Case], evidence: Evidence, candidate: Evaluation,
                     deep: Evaluation | None) -> dict[str, CaseProfileComparison]:
    """Per case: the candidate's profile (the deep one where taken) and its deltas against the incumbent's, with
    why the NCU regression veto could not be checked where it could not (what profile.json holds)."""
    candidate_profiles = profiles_by_case(candidate)
    profiles: dict[str, CaseProfileComparison] = {}
    for case in cases:
        deep_case = deep.case(case.case_id) if deep else None
        mine = (deep_case.profile if deep_case else None) or candidate_profiles.get(case.case_id)
        theirs = evidence.incumbent_profiles.get(case.case_id)
        profiles[case.case_id] = CaseProfileComparison(profile=mine, deltas=profile_rules.profile_deltas(mine, theirs))
        unchecked = profile_rules.ncu_veto_unavailable_reason(mine, theirs)
        if unchecked:
            profiles[case.case_id].veto_diagnostic = unchecked
    return profiles


def ncu_veto(profiles: Mapping[str, CaseProfileComparison], evidence: Evidence) -> str | None:
    """The first case whose NCU main-kernel duration regressed against the incumbent's."""
    for case_id, comparison in profiles.items():
        veto = profile_rules.ncu_regression_veto(comparison.profile, evidence.incumbent_profiles.get(case_id))
        if veto:
            return veto
    return None


def _not_taken(case_id: str, why: str) -> str:
    return f"not taken for {case_id} ({why}: the run's time ran out before it; not promoted without it)"


def evidence_veto(cases: Sequence[Case], required: Sequence[str], candidate: Evaluation, verdict: Verdict,
                  profiles: Mapping[str, Any] | None = None, profiled: Evaluation | None = None) -> str | None:
    """The veto when a protected case's required profile is missing or disagrees with the benchmark. A profile
    the run's time did not allow (`CaseMeasurement.profile_not_taken`) is named as such: the candidate did not
    fail (its evaluation stays correct and measured), but it is not promoted without its evidence, because how
    long a candidate takes before its profile is the candidate's to stretch (a slow verify pushing its profile
    past the cutoff would otherwise excuse a profile-gap cheat). `profiled`: the evaluation that brought the
    profiles, when not the candidate's run (its profile taken after the verdict)."""
    if not required:
        return None
    profiled = profiled or candidate
    profiles = profiles if profiles is not None else profiles_by_case(profiled)
    problems = []
    for case in cases:
        if not case.protected:
            continue
        row = next((r for r in verdict.comparisons if r.case_id == case.case_id), None)
        measured, brought = candidate.case(case.case_id), profiled.case(case.case_id)
        if brought is not None and brought.profile_not_taken and not profiles.get(case.case_id):
            problems.append(_not_taken(case.case_id, brought.profile_not_taken))
            continue
        launches = int((measured.metrics if measured else {}).get("benchmark.replayed_launches") or 1)
        problem = profile_rules.evidence_problem(case.case_id, profiles.get(case.case_id),
                                                 row.candidate_median_us if row else None, list(required), launches)
        if problem:
            problems.append(problem)
    return "profile evidence: " + "; ".join(problems) if problems else None


def candidate_veto(cases: Sequence[Case], evidence: Evidence, candidate: Evaluation, verdict: Verdict,
                   profiles: Mapping[str, CaseProfileComparison], call: DeepProfileCall,
                   profiled: Evaluation | None = None) -> str | None:
    """A candidate's veto, first that applies: required evidence missing or disagreeing, an NCU regression, a
    benchmark speedup the profilers do not back or work moved out of `main_scope`."""
    return (evidence_veto(cases, evidence.required, candidate, verdict,
                          {case_id: comparison.profile for case_id, comparison in profiles.items()}, profiled)
            or ncu_veto(profiles, evidence) or next(iter(call.cross_checks), None))


def no_time_for_profile(seconds_left: float, profile_seconds: float) -> str:
    """Why a candidate promoted on its runs is not profiled now."""
    if seconds_left <= 0:
        return "no time left before the deadline"
    return f"{seconds_left:.0f} s left before the deadline, a profile takes about {profile_seconds:.0f} s"


def cut_by_run_time(cases: Sequence[Case], profile: Evaluation, *, run_time_out: bool) -> str | None:
    """Why a candidate's profile run was cut by the run's time, or None when it was not: its worker timed out
    with no time left of the run (`run_time_out`), or it ended ok with a protected case it had no time to
    profile. Either way the candidate did nothing wrong there; its profile is still owed."""
    if profile.status is EvaluationStatus.TIMEOUT and run_time_out:
        return f"the run's time ran out during its profile run ({profile.reason})"
    if profile.status is not EvaluationStatus.OK:
        return None
    unprofiled = [case.case_id for case in cases if case.protected
                  and (measured := profile.case(case.case_id)) is not None
                  and measured.profile_not_taken and not measured.profile]
    return f"its profile run had no time for {', '.join(unprofiled)}" if unprofiled else None


def deferred_line(why: str) -> str:
    text = f"{why}: promoted on its runs; as the finalist its revalidation profiles it and applies every veto"
    return f"profile=deferred reason={text!r}"


def failed_profile_veto(profile: Evaluation) -> str | None:
    """The veto of a profile worker that did not end ok: it verifies the candidate again before it profiles, so
    an incorrect, crashed or timed-out candidate there is not promoted on its earlier runs (a profile that
    outlasted its own limits failed the candidate's run when its run brought its profile). One the run's own
    time cut is no failure of the candidate (`cut_by_run_time`: its profile is deferred)."""
    if profile.status is EvaluationStatus.OK:
        return None
    return f"the candidate's profile run ended {profile.status.value}: {profile.reason}"


def profiles_not_taken(evaluations: Sequence[Evaluation]) -> list[str]:
    """One line per profile a decision's runs asked for and the run's time did not allow, for the experiment's
    record: which run, which case, and why."""
    return [f"{evaluation.label} run, case {case.case_id}: profile not taken: {case.profile_not_taken} (the run's "
            "time for it ran out)"
            for evaluation in evaluations for case in evaluation.cases if case.profile_not_taken]
