"""Promotion gates as pure functions over measured evaluations.

A candidate is promoted only when every protected case is correct, the weighted geometric-mean
speedup against the neighbouring incumbent measurements reaches `min_speedup`, every case's CV is
within `max_cv`, the statistical test says the gain is above the noise, and no profile veto applies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.decision.bootstrap import PromotionTest, promotion_test
from orchestrator.decision.noise import BetweenRunNoise
from orchestrator.decision.statistics import weighted_geomean
from protocol.bundle import Budget, Case
from protocol.results import CaseComparison, Decision, DecisionStatus, Evaluation, EvaluationStatus


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    comparisons: list[CaseComparison]
    aggregate_speedup: float | None
    test: PromotionTest | None


def _geomean(values: Sequence[float]) -> float:
    return weighted_geomean({str(i): v for i, v in enumerate(values)}, {str(i): 1.0 for i in range(len(values))})


def compare_cases(cases: Sequence[Case], candidates: Sequence[Evaluation],
                  incumbents: Sequence[Evaluation]) -> list[CaseComparison]:
    """Per case: each side's median = geometric mean of its runs' medians; correct only if every
    candidate run was; the worst CV of each side."""
    rows = []
    for case in cases:
        measured = [e.case(case.case_id) for e in candidates]
        incumbent_medians = [m.stats.median for e in incumbents if (m := e.case(case.case_id)) and m.stats]
        incumbent_cvs = [m.stats.cv for e in incumbents if (m := e.case(case.case_id)) and m.stats]
        incumbent_median = _geomean(incumbent_medians) if incumbent_medians else None
        present = all(m is not None for m in measured)
        complete = present and all(m.stats for m in measured)
        correct = all(m.correct for m in measured) if present else None
        candidate_median = _geomean([m.stats.median for m in measured]) if complete else None
        speedup = incumbent_median / candidate_median if incumbent_median and candidate_median and correct else None
        rows.append(CaseComparison(
            case_id=case.case_id, incumbent_median_us=incumbent_median, candidate_median_us=candidate_median,
            speedup=speedup, candidate_cv=max(m.stats.cv for m in measured) if complete else None,
            incumbent_cv=max(incumbent_cvs) if incumbent_cvs else None, correct=correct))
    return rows


def aggregate_speedup(cases: Sequence[Case], comparisons: Sequence[CaseComparison]) -> float:
    """Weighted geometric mean over passing cases; any protected failure gives 0."""
    by_id = {c.case_id: c for c in comparisons}
    speedups: dict[str, float] = {}
    for case in cases:
        row = by_id.get(case.case_id)
        if row is None or not row.correct or row.speedup is None:
            if case.protected:
                return 0.0
            continue
        speedups[case.case_id] = row.speedup
    return weighted_geomean(speedups, {c.case_id: c.weight for c in cases})


def _runs(evaluations: Sequence[Evaluation], case_id: str) -> list[list[float]]:
    return [m.samples_us for e in evaluations if (m := e.case(case_id)) and m.samples_us]


def decide(
    cases: Sequence[Case],
    candidate: Evaluation | Sequence[Evaluation],
    incumbents: Sequence[Evaluation],
    budget: Budget,
    *,
    profile_veto: str | None = None,
    test_seed: int = 0,
    confidence: float = 0.99,
    noise: BetweenRunNoise | None = None,
) -> Verdict:
    """The verdict on one candidate from its run(s) and the neighbouring incumbent runs."""
    candidates = [candidate] if isinstance(candidate, Evaluation) else list(candidate)
    if not candidates:
        raise ValueError("no candidate evaluation to decide on")
    if any(e.label == "diagnostic" for e in (*candidates, *incumbents)):
        raise ValueError("diagnostic-only (instrumented) evaluations never take part in a promotion decision")
    noise = noise or BetweenRunNoise()
    candidate = next((e for e in candidates if e.status is not EvaluationStatus.OK), candidates[-1])
    if candidate.status is not EvaluationStatus.OK:
        return Verdict(Decision(status=DecisionStatus.REJECTED if candidate.status is EvaluationStatus.INCORRECT
                                else DecisionStatus.FAILED,
                                reason=f"{candidate.status.value}: {candidate.reason}",
                                gates={"correct": False}), [], 0.0 if candidate.status is EvaluationStatus.INCORRECT else None, None)
    broken = [e for e in incumbents if e.status is not EvaluationStatus.OK]
    if broken or not incumbents:
        reason = (f"incumbent re-measurement {broken[0].status.value}: {broken[0].reason}" if broken
                  else "no incumbent measurement")
        measured = [e for e in incumbents if e.status is EvaluationStatus.OK]
        if measured and all(e.status is EvaluationStatus.TIMEOUT for e in broken):
            # An incumbent run cut by a deadline (the run's, at its end) leaves fewer runs, which can still
            # show the candidate wrong, too slow, unstable or vetoed; never promote it, nor reject on noise.
            partial = decide(cases, candidates, measured, budget, profile_veto=profile_veto, test_seed=test_seed,
                             confidence=confidence, noise=noise)
            final = [gate for gate in ("correct", "speedup", "cv", "profile") if partial.decision.gates.get(gate) is False]
            if partial.decision.status is DecisionStatus.REJECTED and final:
                return dataclasses.replace(partial, decision=partial.decision.model_copy(update={
                    "reason": f"{partial.decision.reason} (on {len(measured)} incumbent run(s): {reason})"}))
        return Verdict(Decision(status=DecisionStatus.FAILED, reason=reason), [], None, None)

    comparisons = compare_cases(cases, candidates, incumbents)
    aggregate = aggregate_speedup(cases, comparisons)
    correct = all(row.correct for row, case in zip(comparisons, cases, strict=True) if case.protected)
    unstable = [row.case_id for row in comparisons if row.correct and row.candidate_cv is not None
                and row.candidate_cv > budget.max_cv]
    passing = [case for case, row in zip(cases, comparisons, strict=True) if row.correct and row.speedup]
    test = None
    if correct and passing:
        test = promotion_test(
            {c.case_id: _runs(candidates, c.case_id) for c in passing},
            {c.case_id: _runs(incumbents, c.case_id) for c in passing},
            {c.case_id: c.weight for c in passing}, budget.min_speedup, confidence=confidence, seed=test_seed,
            noise_floor=noise.floor, learned_sd=noise.learned_sd,
            learned_sd_by_case=noise.by_case)
    gates = {
        "correct": correct,
        "speedup": aggregate >= budget.min_speedup,
        "cv": not unstable,
        "noise": bool(test and test.passes_noise),
        "profile": profile_veto is None,
    }
    if not correct:
        failed = next(row.case_id for row, case in zip(comparisons, cases, strict=True) if case.protected and not row.correct)
        reason = f"protected case {failed} incorrect"
    elif not gates["speedup"]:
        reason = f"speedup {aggregate:.4f}x below the {budget.min_speedup:.4f}x threshold"
    elif not gates["cv"]:
        worst = max((r for r in comparisons if r.case_id in unstable), key=lambda r: r.candidate_cv or 0.0)
        reason = f"timing CV {worst.candidate_cv:.4f} exceeds {budget.max_cv:.4f} for case {worst.case_id}"
    elif not gates["noise"]:
        reason = f"gain not above noise: {test.reason if test else 'no test'}"
    elif not gates["profile"]:
        reason = f"profile veto: {profile_veto}"
    else:
        reason = f"correct and {aggregate:.4f}x >= {budget.min_speedup:.4f}x; {test.reason if test else ''}".rstrip("; ")
    status = DecisionStatus.PROMOTED if all(gates.values()) else DecisionStatus.REJECTED
    return Verdict(Decision(status=status, reason=reason, gates=gates), comparisons, aggregate, test)


def needs_confirmation(verdict: Verdict) -> bool:
    """Only the noise gate stands between this candidate and promotion: more runs can decide it.

    Correct, fast enough at the point estimate, stable and unvetoed, but the lower bound is not above
    1.0: the run measures another candidate/incumbent pair instead of rejecting a gain that drift hid.
    """
    gates = verdict.decision.gates
    return bool(gates) and not gates.get("noise", True) and all(
        gates.get(name, False) for name in ("correct", "speedup", "cv", "profile"))
