"""Decide a measurement study's trials again from its recorded runs: false promotions and known gains.

A study (`scripts/measurement_study.py`, docs/measurement.md) measured, per example, five variants in fresh
processes: A (the kernel), A2 (a comment changed: an A/A candidate) and T2/T3/T5 (the kernel followed by 2, 3
or 5 % of calibrated extra GPU work: an incumbent whose removal, candidate A, is a true gain). A trial takes
an A/B/A triple of those runs as a run schedules them (the candidate's run from another process than both
incumbent runs) and has the product's referee (`referee.py`) decide it, on the noise a run would have learnt
(the incumbent variant's repeated runs, t-inflated), with the confirmation pairs it asks for drawn from further
runs of the same variants, none twice. Runs are real; trials are drawn from them.

Each example is decided alone (one case), and, where the study holds several, all of them together as one
candidate with a case per example, each case's runs drawn from its own example: only there does the per-case
regression gate have a case to hold against the aggregate. The `hidden_regression` cell gives every case but
the last a 5 % gain (weight 2) and the last a 3 % loss (incumbent A, candidate T3): the aggregate gains, one
protected case is slower. Every cell is also decided with that gate off (`max_case_regression` 1.0) from the
same draws, so a table shows what the gate changes.

With `reuse_incumbent_run`, a trial is decided as a triaging run decides it by default: the first incumbent run
drawn is the incumbent's last run in the history, the candidate's run is triaged against it and, let through,
decided with one more incumbent run (two new runs, not three; `referee.py`).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.decision.gates import Verdict
from orchestrator.decision.noise import DEFAULT_NOISE_FLOOR, BetweenRunNoise, RunMedians, noise_from_history
from orchestrator.decision.referee import Measure, NoiseRule, Referee, Rules, Ruling
from orchestrator.decision.statistics import sample_stats
from protocol.base import StrictModel
from protocol.bundle import Budget, Case
from protocol.results import CaseMeasurement, Evaluation, EvaluationStatus
from protocol.roles import Role

GAINS = {"T2": 0.02, "T3": 0.03, "T5": 0.05}
VARIANTS = ("A", "A2", *GAINS)
CASE_GATE_OFF = 1.0  # a loss of 100 % is never exceeded: the per-case regression gate never fails


class StudyRun(StrictModel):
    """One benchmarked run of one variant in one fresh process (a line of a study's runs_*.json)."""

    variant: str
    process: int
    block: int
    samples_us: list[float]


class StudyMeasurement(StrictModel):
    """One process's runs of one example (a study's runs_<example>_<process>.json)."""

    example: str
    process: int
    kernel_us: float
    cycles_per_us: float | None = None
    case: dict[str, Any] = {}
    runs: list[StudyRun]


class CellOutcome(StrictModel):
    trials: int
    promoted: int
    promoted_without_case_gate: int  # the same draws decided with the per-case regression gate off
    case_gate_failed: int  # trials whose final verdict failed the per-case regression gate
    confirmed_trials: int  # trials that measured at least one confirmation pair
    mean_runs: float
    noise: dict[str, Any]  # the learnt noise of the incumbent variant (per case)

    @property
    def rate(self) -> float:
        return self.promoted / self.trials


class ExampleNoise(StrictModel):
    kernel_us: float
    run_median_cv_A: float
    between_run_log_stdev: float
    within_run_cv_median: float
    runs_per_variant: int
    measured_gain: dict[str, float]


class StudyResult(StrictModel):
    """Per example (and "combined" for all of them as one candidate): the noise seen and each cell's outcome."""

    noise: dict[str, ExampleNoise]
    outcomes: dict[str, dict[str, CellOutcome]]
    trials: int
    seed: int
    learn_noise: bool
    confirm_pairs: int
    confidence: float
    min_speedup: float
    max_case_regression: float
    reuse_incumbent_run: bool = False  # trials triaged and decided on a reused incumbent run


@dataclass(frozen=True)
class _Side:
    """What one case of a cell compares: its runs by variant and which variant each side draws from."""

    case: Case
    incumbent: list[StudyRun]
    candidate: list[StudyRun]


def _by_example(measurements: Sequence[StudyMeasurement]) -> dict[str, dict[str, list[StudyRun]]]:
    examples: dict[str, dict[str, list[StudyRun]]] = {}
    for data in measurements:
        by_variant = examples.setdefault(data.example, {})
        for run in data.runs:
            by_variant.setdefault(run.variant, []).append(run)
    for example, by_variant in examples.items():
        missing = [v for v in VARIANTS if not by_variant.get(v)]
        if missing:
            raise ValueError(f"example {example!r} has no run of variant(s) {', '.join(missing)}")
    return examples


def _evaluation(label: str, cases: Sequence[Case], runs: Sequence[StudyRun]) -> Evaluation:
    measured = [CaseMeasurement(case_id=case.case_id, protected=True, weight=case.weight, correct=True,
                                samples_us=run.samples_us, stats=sample_stats(run.samples_us))
                for case, run in zip(cases, runs, strict=True)]
    return Evaluation(label=label, status=EvaluationStatus.OK, cases=measured)


def trial(sides: Sequence[_Side], noise: BetweenRunNoise, budget: Budget, rng: random.Random,
          confirm_pairs: int, confidence: float = 0.99,
          reuse_incumbent_run: bool = False) -> tuple[Verdict, int, int, bool]:
    """One A/B/A trial decided by the product's referee, its confirmation pairs drawn as it asks for them. Returns
    the verdict, the runs used, the confirmation pairs measured, and whether any verdict on the way had the
    per-case regression gate to thank for its course (failed, or a case undecided): only then can the gate-off
    replay differ. `reuse_incumbent_run`: the first incumbent run drawn is the history's last one, triaged
    against and reused."""
    cases = tuple(side.case for side in sides)
    incumbents: list[list[StudyRun]] = []
    candidates: list[list[StudyRun]] = []
    for side in sides:
        drawn = rng.sample(side.incumbent, 2)
        processes = {run.process for run in drawn}
        incumbents.append(drawn)
        candidates.append([rng.choice([r for r in side.candidate if r.process not in processes] or side.candidate)])
    test_seed = rng.randrange(2**31)

    def spare(pool: list[StudyRun], used: list[StudyRun]) -> list[StudyRun]:
        taken = {id(run) for run in used}
        return [run for run in pool if id(run) not in taken]

    def another_pair_fits() -> bool:
        return all(spare(side.candidate, [*candidates[i], *incumbents[i]])
                   and spare(side.incumbent, [*candidates[i], *incumbents[i]]) for i, side in enumerate(sides))

    referee = Referee(Rules(cases=cases, budget=budget, confidence=confidence, confirm_pairs=confirm_pairs,
                            noise=NoiseRule(given=noise), triage=reuse_incumbent_run,
                            reuse_incumbent_run=reuse_incumbent_run))
    history, taken = RunMedians(), {"candidate": 0, "incumbent": 0}
    if reuse_incumbent_run:
        history = history.with_run("incumbent", _evaluation(Role.INCUMBENT.value, cases,
                                                            [drawn[0] for drawn in incumbents]))
        taken["incumbent"] = 1
    state = referee.start(role=Role.CANDIDATE, test_seed=test_seed, history=history,
                         digests=("candidate", "incumbent"))
    while not isinstance(action := referee.next(state), Ruling):
        assert isinstance(action, Measure)  # no profile evidence in a study
        if action.pair and action.side == "candidate":  # a pair is drawn whole, candidate first, side by side
            for index, side in enumerate(sides):
                for drawn, pool in ((candidates[index], side.candidate), (incumbents[index], side.incumbent)):
                    drawn.append(rng.choice(spare(pool, [*candidates[index], *incumbents[index]])))
        runs = candidates if action.side == "candidate" else incumbents
        run = _evaluation(action.role.value, cases, [drawn[taken[action.side]] for drawn in runs])
        taken[action.side] += 1
        # the study's clock: another pair fits while every side has runs of both variants left to draw
        state = referee.measured(state, run, math.inf if another_pair_fits() else 0.0)
    gate_mattered = any(verdict.decision.gates.get("case_regression") is False or bool(verdict.undecided_cases)
                        for verdict in action.verdicts)
    used = sum(len(c) + len(i) for c, i in zip(candidates, incumbents, strict=True)) // len(sides)
    return action.verdict, used, action.pairs, gate_mattered


def _cell(sides: Sequence[_Side], noise: BetweenRunNoise, budget: Budget, rng: random.Random, trials: int,
          confirm_pairs: int, confidence: float, reuse_incumbent_run: bool) -> CellOutcome:
    gate_off = budget.model_copy(update={"max_case_regression": CASE_GATE_OFF})
    promoted = without = failed = confirmed = runs_used = 0
    for _ in range(trials):
        state = rng.getstate()
        verdict, used, pairs, gate_mattered = trial(sides, noise, budget, rng, confirm_pairs, confidence,
                                                    reuse_incumbent_run)
        promoted_now = verdict.decision.status.value == "promoted"
        if gate_mattered:  # decide the same draws again with the gate off
            again = random.Random()
            again.setstate(state)
            promoted_off = trial(sides, noise, gate_off, again, confirm_pairs,
                                 confidence, reuse_incumbent_run)[0].decision.status.value == "promoted"
        else:
            promoted_off = promoted_now
        promoted += promoted_now
        without += promoted_off
        failed += verdict.decision.gates.get("case_regression") is False
        confirmed += pairs > 0
        runs_used += used
    return CellOutcome(trials=trials, promoted=promoted, promoted_without_case_gate=without, case_gate_failed=failed,
                       confirmed_trials=confirmed, mean_runs=runs_used / trials, noise=noise.as_dict())


def _noise_of(by_variant: Mapping[str, list[StudyRun]]) -> ExampleNoise:
    medians = {v: [statistics.median(r.samples_us) for r in runs] for v, runs in by_variant.items()}
    a_logs = [math.log(m) for m in medians["A"] + medians["A2"]]
    return ExampleNoise(
        kernel_us=statistics.median(medians["A"]),
        run_median_cv_A=statistics.pstdev(medians["A"]) / statistics.mean(medians["A"]),
        between_run_log_stdev=statistics.pstdev(a_logs),
        within_run_cv_median=statistics.median(statistics.pstdev(r.samples_us) / statistics.mean(r.samples_us)
                                               for r in by_variant["A"]),
        runs_per_variant=len(by_variant["A"]),
        measured_gain={g: statistics.median(medians[g]) / statistics.median(medians["A"]) for g in GAINS})


def _learnt(sides: Sequence[_Side], learn_noise: bool, confidence: float, floor: float) -> BetweenRunNoise:
    if not learn_noise:
        return BetweenRunNoise(floor=floor)
    return noise_from_history({side.case.case_id: [[statistics.median(r.samples_us) for r in side.incumbent]]
                               for side in sides}, confidence=confidence, floor=floor)


def analyse(measurements: Sequence[StudyMeasurement], trials: int, seed: int, *, learn_noise: bool = True,
            confirm_pairs: int = 2, budget: Budget | None = None, confidence: float = 0.99,
            noise_floor: float = DEFAULT_NOISE_FLOOR, reuse_incumbent_run: bool = False) -> StudyResult:
    """Every example's cells (A/A, T2, T3, T5), then, with two or more examples, the combined candidate's.
    `reuse_incumbent_run`: each trial triaged and decided on a reused incumbent run (`trial`)."""
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    budget = budget or Budget()
    rng = random.Random(seed)
    examples = _by_example(measurements)
    outcomes: dict[str, dict[str, CellOutcome]] = {}
    for example, by_variant in examples.items():
        case = Case(case_id=example)
        outcomes[example] = {}
        for name, incumbent, candidate in (("aa", "A", "A2"), *((g, g, "A") for g in GAINS)):
            sides = [_Side(case, by_variant[incumbent], by_variant[candidate])]
            outcomes[example][name] = _cell(sides, _learnt(sides, learn_noise, confidence, noise_floor), budget, rng,
                                            trials, confirm_pairs, confidence, reuse_incumbent_run)
    if len(examples) > 1:
        names = list(examples)
        cells = {"aa": [("A", "A2", 1.0)] * len(names), "T3": [("T3", "A", 1.0)] * len(names),
                 "hidden_regression": [("T5", "A", 2.0)] * (len(names) - 1) + [("A", "T3", 1.0)]}
        outcomes["combined"] = {}
        for name, plan in cells.items():
            sides = [_Side(Case(case_id=example, weight=weight), examples[example][incumbent],
                           examples[example][candidate])
                     for example, (incumbent, candidate, weight) in zip(names, plan, strict=True)]
            outcomes["combined"][name] = _cell(sides, _learnt(sides, learn_noise, confidence, noise_floor), budget,
                                               rng, trials, confirm_pairs, confidence, reuse_incumbent_run)
    return StudyResult(noise={example: _noise_of(by_variant) for example, by_variant in examples.items()},
                       outcomes=outcomes, trials=trials, seed=seed, learn_noise=learn_noise,
                       confirm_pairs=confirm_pairs, confidence=confidence, min_speedup=budget.min_speedup,
                       max_case_regression=budget.max_case_regression, reuse_incumbent_run=reuse_incumbent_run)
