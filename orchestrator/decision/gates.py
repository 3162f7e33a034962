"""Promotion gates as pure functions over measured evaluations.

A candidate is promoted only when every protected case is correct, the weighted geometric-mean
speedup against the neighbouring incumbent measurements reaches `min_speedup`, no protected case is slower
beyond its noise by more than `max_case_regression` (the case's upper confidence bound from the same
bootstrap, with that case's learnt between-run sd), every case's CV is within `max_cv`, the statistical
test says the gain is above the noise, and no profile veto applies.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.decision.bootstrap import PromotionTest, promotion_test
from orchestrator.decision.noise import BetweenRunNoise
from orchestrator.decision.statistics import weighted_geomean
from protocol.bundle import Budget, Case
from protocol.results import (
    CaseComparison,
    CaseMeasurement,
    Decision,
    DecisionStatus,
    Evaluation,
    EvaluationStatus,
)

# The gate a candidate fails when its run ended before it was verified and timed (crashed, timed out, refused by
# a limit, the sandbox or the judge): such a run says nothing about correctness. Older records named it `correct`.
UNFINISHED_GATE = "completed"


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    comparisons: list[CaseComparison]
    aggregate_speedup: float | None
    test: PromotionTest | None
    # Protected cases whose point estimate is slower than `1 - max_case_regression` while their upper bound
    # is not: perhaps slower, perhaps noise. More runs can tell (`needs_confirmation`).
    undecided_cases: tuple[str, ...] = ()
    # a triaged verdict's figures (`triage`): what it was compared with, its bars and the cases it found slower
    triage: dict[str, Any] | None = None


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


def case_regression_threshold(budget: Budget) -> float:
    """The speedup below which a protected case counts as slower: 0.98 at the default 2 %."""
    return 1.0 - budget.max_case_regression


@dataclass(frozen=True)
class SlowerCase:
    """A protected case whose speedup's point estimate lies below the threshold."""

    case_id: str
    speedup: float
    upper: float  # the one-sided upper bound at the test's confidence
    threshold: float

    @property
    def beyond_noise(self) -> bool:
        return self.upper < self.threshold

    def describe(self) -> str:
        relation = "<" if self.beyond_noise else ">="
        return f"{self.case_id}: {self.speedup:.3f}x, upper bound {self.upper:.3f}x {relation} {self.threshold:g}"


def slower_cases(cases: Sequence[Case], test: PromotionTest, budget: Budget) -> list[SlowerCase]:
    """The protected cases whose point estimate lies below `1 - max_case_regression`, in case order.

    One whose upper bound lies below it too is slower beyond its noise: at the test's confidence it lost more
    than `max_case_regression`, which no gain elsewhere buys back. One whose bound does not is undecided. The
    bound comes from the bootstrap the aggregate test ran: the same runs, blocks and shared per-run drift,
    scaled by the case's own learnt between-run sd.
    """
    threshold = case_regression_threshold(budget)
    found = []
    for case in cases:
        measured = test.per_case.get(case.case_id)
        if case.protected and measured is not None and measured.speedup < threshold:
            found.append(SlowerCase(case.case_id, measured.speedup, measured.upper, threshold))
    return found


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
        wrong = candidate.status is EvaluationStatus.INCORRECT
        # only a run that was verified and found wrong fails `correct`: nothing downstream (a revalidation's advice)
        # reads a crash or a cut as a wrong result
        return Verdict(Decision(status=DecisionStatus.REJECTED if wrong else DecisionStatus.FAILED,
                                reason=f"{candidate.status.value}: {candidate.reason}",
                                gates={"correct": False} if wrong else {UNFINISHED_GATE: False}),
                       [], 0.0 if wrong else None, None)
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
            final = [gate for gate in ("correct", "speedup", "case_regression", "cv", "profile")
                     if partial.decision.gates.get(gate) is False]
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
    slower = slower_cases(cases, test, budget) if test else []
    slowed = [case.describe() for case in slower if case.beyond_noise]
    undecided = [case for case in slower if not case.beyond_noise]
    gates = {
        "correct": correct,
        "speedup": aggregate >= budget.min_speedup,
        "case_regression": not slowed,
        "cv": not unstable,
        "noise": bool(test and test.passes_noise),
        "profile": profile_veto is None,
    }
    if not correct:
        failed = next(row.case_id for row, case in zip(comparisons, cases, strict=True) if case.protected and not row.correct)
        reason = f"protected case {failed} incorrect"
    elif not gates["speedup"]:
        reason = f"speedup {aggregate:.4f}x below the {budget.min_speedup:.4f}x threshold"
        if slowed:
            reason += f"; protected case slower: {'; '.join(slowed)}"
    elif not gates["case_regression"]:
        reason = (f"protected case slower by more than {budget.max_case_regression:.0%}: {'; '.join(slowed)} "
                  f"(aggregate {aggregate:.4f}x)")
    elif not gates["cv"]:
        worst = max((r for r in comparisons if r.case_id in unstable), key=lambda r: r.candidate_cv or 0.0)
        reason = f"timing CV {worst.candidate_cv:.4f} exceeds {budget.max_cv:.4f} for case {worst.case_id}"
    elif not gates["noise"]:
        reason = f"gain not above noise: {test.reason if test else 'no test'}"
    elif not gates["profile"]:
        reason = f"profile veto: {profile_veto}"
    else:
        reason = f"correct and {aggregate:.4f}x >= {budget.min_speedup:.4f}x; {test.reason if test else ''}".rstrip("; ")
    if undecided and all(gates.values()):
        reason += f"; possibly slower, within noise: {'; '.join(case.describe() for case in undecided)}"
    status = DecisionStatus.PROMOTED if all(gates.values()) else DecisionStatus.REJECTED
    return Verdict(Decision(status=status, reason=reason, gates=gates), comparisons, aggregate, test,
                   tuple(case.case_id for case in undecided))


# A triaged candidate is rejected only when it is slower than this, beyond the run's learnt noise: the drift
# between the incumbent's last run and the candidate's (0.8 % was seen between processes on the H200) stays
# well inside it, so a candidate the full schedule could promote is not thrown out on one run.
TRIAGE_MARGIN = 0.03
# each case's margin is at least this many times what is known of its scatter: the learnt between-run sd, and
# the standard error of the candidate run's median (1.2533 sd / sqrt(n): wide under the interpreter, where one
# run's median can be off by several percent before the run has learnt anything)
TRIAGE_NOISE_SDS = 4.0
TRIAGE_GATE = "triage"


def triage_margin(noise: BetweenRunNoise, case_id: str, measured: CaseMeasurement | None = None) -> float:
    """How much slower than its bar a triaged candidate's case must measure to count: TRIAGE_MARGIN, or more for
    a case whose learnt between-run sd, or whose run's own scatter, is wide."""
    between = noise.by_case.get(case_id)
    if between is None:
        between = noise.learned_sd if noise.learned_sd is not None else noise.floor
    within = 0.0
    if measured is not None and measured.stats is not None and measured.stats.n > 0:
        within = 1.2533 * measured.stats.cv / math.sqrt(measured.stats.n)
    return max(TRIAGE_MARGIN, TRIAGE_NOISE_SDS * math.hypot(max(between, noise.floor), within))


def triage(cases: Sequence[Case], candidate: Evaluation, last_incumbent_run: dict[str, float], budget: Budget,
           noise: BetweenRunNoise) -> Verdict | None:
    """The verdict on a candidate's first run against the incumbent's last run in this run (case id -> median),
    when that run alone rejects it; None when it could still be promoted and the full schedule must measure it.

    Rejects only what the full schedule would: the weighted speedup below `min_speedup` by more than the widest
    case margin, or a protected case below `1 - max_case_regression` by more than its own (`triage_margin`). A
    failed or incomplete run, or a case the incumbent's last run lacks, is left to the schedule. Triage never
    promotes: a candidate it lets through is measured side by side as any other."""
    if candidate.status is not EvaluationStatus.OK:
        return None
    comparisons, margins = [], {}
    for case in cases:
        measured = candidate.case(case.case_id)
        incumbent = last_incumbent_run.get(case.case_id)
        if measured is None or measured.stats is None or not measured.correct or not incumbent:
            return None
        margins[case.case_id] = triage_margin(noise, case.case_id, measured)
        comparisons.append(CaseComparison(
            case_id=case.case_id, incumbent_median_us=incumbent, candidate_median_us=measured.stats.median,
            speedup=incumbent / measured.stats.median, candidate_cv=measured.stats.cv, incumbent_cv=None,
            correct=True))
    aggregate = aggregate_speedup(cases, comparisons)
    margin = max(margins.values())
    bar = budget.min_speedup * (1.0 - margin)
    case_bars = {case.case_id: case_regression_threshold(budget) * (1.0 - margins[case.case_id])
                 for case in cases if case.protected}
    slowed = [row for row in comparisons
              if row.case_id in case_bars and row.speedup is not None and row.speedup < case_bars[row.case_id]]
    if aggregate >= bar and not slowed:
        return None
    reasons, gates = [], {"correct": True}
    if aggregate < bar:
        reasons.append(f"speedup {aggregate:.4f}x < {bar:.4f}x (the {budget.min_speedup:.4f}x threshold less a "
                       f"{margin:.1%} margin)")
        gates["speedup"] = False
    if slowed:
        reasons.append("protected case slower: " + "; ".join(
            f"{row.case_id} {row.speedup:.3f}x < {case_bars[row.case_id]:.3f}x" for row in slowed))
        gates["case_regression"] = False
    reason = (f"triaged on its first run against the incumbent's last run in this run: {', and '.join(reasons)}; "
              "the incumbent was not measured again")
    figures = {"against": "the incumbent's last run in this run", "speedup_bar": bar, "margins": margins,
               "case_bars": case_bars, "slower_cases": [row.case_id for row in slowed]}
    return Verdict(Decision(status=DecisionStatus.REJECTED, reason=reason, gates={**gates, TRIAGE_GATE: False}),
                   comparisons, aggregate, None, triage=figures)


def needs_confirmation(verdict: Verdict) -> bool:
    """More runs can decide this candidate: every gate but the noise gate passes, and either the noise gate
    fails or a protected case is undecided.

    Correct, fast enough at the point estimate, no case slower beyond its noise, stable and unvetoed, but the
    lower bound is not above 1.0: the run measures another candidate/incumbent pair instead of rejecting a gain
    that drift hid. Likewise a candidate that would be promoted while a protected case's point estimate is
    slower than the threshold but its upper bound is not (early in a run the learnt noise has few degrees of
    freedom and is wide): more pairs narrow that case's bound, so a real regression is found before the
    promotion and noise is not held against the candidate. A case already slower beyond its noise is not
    measured again: its upper bound excludes even a `max_case_regression` loss at the test's confidence, and
    more runs of a case that slow rarely lift it. Nor is any other failed gate: correctness, the point
    estimate, the CV and the vetoes are verdicts that more runs of the same sources do not overturn.
    """
    gates = verdict.decision.gates
    others_pass = all(passed for name, passed in gates.items() if name != "noise")
    return bool(gates) and others_pass and (not gates.get("noise", True) or bool(verdict.undecided_cases))
