"""Decide a recorded run's experiments again from its records, without a worker.
Long because: records of every age are read (before the noise was learnt, or learnt per case, before the per-case
gate, without raw samples), and each replay says what it could not rebuild and which policy changes what.

Kernel Tuner replays a search from its cache; this replays the promotion policy from a run's records, so a
change to the policy can be tried on real runs in milliseconds. Each measured experiment is decided again by
the referee the run itself uses (`referee.py`), fed the recorded runs in the order it asks for them: the
`--schedule` runs (in a run that triages, candidate first: the triage schedule, or the one run that rejected it),
then each confirmation pair it asks for while the record holds one (the recording is the clock: another pair
fits when the run measured one). What differs from a run is only what a record cannot give:
- the between-run noise history is rebuilt from every benchmarked run recorded before the decision, in
  evaluation order, grouped by the normalized digest of the source measured (an incumbent's is its parent
  record's), as `noise.RunMedians`, which the referee extends with the runs it is fed;
- the test seed is the recorded one, and the profile veto is carried from the record where its profile gate
  failed (the profiles are not judged again);
- records decided before the noise was learnt, or learnt per case, are decided with the noise model of their
  day (`Policy.noise_model` "recorded"), and records whose raw samples were dropped carry their noise gate.
Duplicates and failed proposals had no measurement and are carried over as recorded. A `Policy` override
shows which decisions would change; where one changes the incumbent the run diverges, and later rows judge
measurements that such a run would not have made (`after_divergence`).

Gates added since a record was decided (`GATES_SINCE`: the per-case regression gate) are applied to it all
the same, so a replay shows what the product decides now; the run says so, and the replay is taken a second
time with those gates off to check that everything else reproduces (`reproduced_without_new_gates`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from orchestrator.decision.gates import TRIAGE_GATE, UNFINISHED_GATE, Verdict
from orchestrator.decision.noise import DEFAULT_NOISE_FLOOR, BetweenRunNoise, RunMedians
from orchestrator.decision.referee import NoiseRule, Referee, Rules, Ruling
from orchestrator.decision.schedule import measurement_schedule
from protocol.base import StrictModel
from protocol.bundle import Budget, Case
from protocol.results import DecisionStatus, Evaluation, EvaluationStatus, ExperimentRecord
from protocol.roles import Role

# Labels of the runs the loop benchmarks: only these feed its between-run noise (a promoted candidate's profile,
# deep profiles, commit checks and diagnostic traces run with benchmark=False). A replay judges no profile: a
# record's profile veto is carried, so the profiles a decision took after its verdict are never asked for again.
BENCHMARKED_LABELS = frozenset(role.value for role in Role if role.decides)
TOLERANCE = 1e-9
PROMOTING = frozenset({DecisionStatus.PROMOTED, DecisionStatus.REVALIDATED})  # a new incumbent or the winner
SEED = re.compile(r"\bseed (\d+)\b")  # the end of `PromotionTest.method`
VETO = "profile veto: "  # how `decide` words a failed profile gate
# Gates a record may predate, and the policy value that turns each off (a regression of 100 % is never exceeded).
GATES_SINCE = {"case_regression": 1.0}


class Policy(StrictModel):
    """What to decide with instead of what each decision used; None keeps the recorded value. `noise_model`
    "recorded" keeps the model each record was decided with (learnt from the run's history where it records
    `between_run_noise`, per case where that holds `by_case` and the noisiest case's for all before that, the
    floor alone before any); "learned" (per case, as runs decide now) and "floor" force one."""

    min_speedup: float | None = Field(default=None, ge=1.0)
    confidence: float | None = Field(default=None, gt=0.5, lt=1.0)
    max_cv: float | None = Field(default=None, ge=0.0)
    max_case_regression: float | None = Field(default=None, ge=0.0, le=1.0)
    noise_floor: float | None = Field(default=None, ge=0.0)
    noise_model: Literal["recorded", "learned", "floor"] = "recorded"

    @property
    def overrides(self) -> bool:
        return self != Policy()

    @property
    def changes_the_test(self) -> bool:
        """Would the noise test's lower bound change? (`min_speedup` and `max_cv` leave it as it is.)"""
        return self.confidence is not None or self.noise_floor is not None or self.noise_model != "recorded"


class RecordedSettings(StrictModel):
    """The run's settings that decisions depend on, from its run.json; without one, the run's defaults."""

    min_speedup: float = Budget().min_speedup
    max_cv: float = Budget().max_cv
    # None: the run predates the per-case regression gate; its decisions are replayed at today's default
    max_case_regression: float | None = Field(default=None, ge=0.0, le=1.0)
    schedule: str = "aba"  # the `--schedule` default
    confirm_pairs: int | None = Field(default=None, ge=0)  # None: as many pairs as each record holds
    triage: bool = False  # `--triage` (absent from runs older than it)
    reuse_incumbent_run: bool = False  # `--reuse-incumbent-run` (absent from runs older than it)
    source: str = "defaults"

    @field_validator("schedule")
    @classmethod
    def _a_schedule(cls, pattern: str) -> str:
        measurement_schedule(pattern)
        return pattern


class DecisionView(StrictModel):
    """The fields of one decision that a replay compares."""

    status: DecisionStatus
    gates: dict[str, bool] = Field(default_factory=dict)
    aggregate_speedup: float | None = None
    lower_bound: float | None = None
    learned_sd: float | None = None
    noise_dof: int | None = None
    reason: str | None = None


class ExperimentReplay(StrictModel):
    experiment_id: str
    replayed: bool  # False: no measurement to decide on (duplicate, failed proposal); carried over
    recorded: DecisionView
    simulated: DecisionView | None  # None: the records cannot be decided again (the notes say why)
    match: bool
    first_difference: str | None = None
    carried: list[str] = Field(default_factory=list)  # inputs taken from the record, not rebuilt
    notes: list[str] = Field(default_factory=list)
    after_divergence: bool = False
    new_gates: list[str] = Field(default_factory=list)  # gates this record predates, applied in the replay
    # With `new_gates` off, does the replay reproduce the record? None when the record predates no gate.
    reproduced_without_new_gates: bool | None = None


class RunReplay(StrictModel):
    experiments: list[ExperimentReplay]
    all_match: bool
    # Every decision reproduced, each under the gates it was decided with (a decision changed only by a gate
    # its record predates counts as reproduced); what the exit code of `tlx-agent simulate` reports.
    all_reproduced: bool
    policy: Policy
    settings: RecordedSettings
    diverges_at: str | None = None  # the first experiment whose promotion this policy decides otherwise
    notes: list[str] = Field(default_factory=list)


class _NotReplayable(Exception):
    """The records of one experiment cannot be decided again; the message says why."""


def split_runs(evaluations: Sequence[Evaluation], schedule: Sequence[str],
               role: str) -> tuple[list[Evaluation], list[list[Evaluation]]]:
    """The schedule's runs, then the confirmation pairs (candidate, incumbent) measured after them.

    A failed candidate run ends the measurement, and no pair follows a failed run (the verdict then
    fails or rejects); records that do not fit this shape raise ValueError."""
    runs = list(evaluations)
    position = 0

    def take(label: str) -> Evaluation:
        nonlocal position
        if position >= len(runs) or runs[position].label != label:
            found = runs[position].label if position < len(runs) else "nothing"
            raise ValueError(f"run {position} should be {label!r} by the schedule and its pairs, found {found!r} "
                             f"(labels: {[e.label for e in runs]})")
        position += 1
        return runs[position - 1]

    initial: list[Evaluation] = []
    for side in schedule:
        initial.append(take(role if side == "candidate" else "incumbent"))
        if side == "candidate" and initial[-1].status is not EvaluationStatus.OK:
            break
    pairs: list[list[Evaluation]] = []
    while position < len(runs):
        if any(e.status is not EvaluationStatus.OK for group in (initial, *pairs) for e in group):
            raise ValueError(f"{len(runs) - position} run(s) recorded after a failed run "
                             f"(labels: {[e.label for e in runs]})")
        pairs.append([take(role)])
        if pairs[-1][0].status is EvaluationStatus.OK:
            pairs[-1].append(take("incumbent"))
    return initial, pairs


def recorded_seed(statistics: dict[str, Any]) -> int | None:
    """The promotion test's seed: its own field where the record has one, else the end of `method`."""
    if isinstance(statistics.get("seed"), int):
        return statistics["seed"]
    found = SEED.search(str(statistics.get("method", "")))
    return int(found.group(1)) if found else None


def samples_dropped(evaluation: Evaluation) -> bool:
    """A file that kept each run's statistics but not its raw samples (as some docs/data files do)."""
    return evaluation.status is EvaluationStatus.OK and any(
        m.stats is not None and m.stats.n > 0 and not m.samples_us for m in evaluation.cases)


def _one_sample_per_run(evaluation: Evaluation) -> Evaluation:
    """Each run reduced to its median: `decide` needs samples to run its test, but every gate other than
    the noise gate, and the aggregate, read only the recorded stats, which stay as they are."""
    cases = [m.model_copy(update={"samples_us": [m.stats.median]}) if m.stats is not None and not m.samples_us
             else m for m in evaluation.cases]
    return evaluation.model_copy(update={"cases": cases})


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def first_difference(recorded: DecisionView, simulated: DecisionView) -> str | None:
    """The first compared field that differs: status, a gate, the aggregate, the lower bound, the noise. A gate
    the record does not hold and the replay passes changes nothing (a gate added since the record)."""
    if recorded.status != simulated.status:
        return "status"
    for gate in [*recorded.gates, *(g for g, passed in simulated.gates.items() if g not in recorded.gates and not passed)]:
        if recorded.gates.get(gate) != simulated.gates.get(gate):
            return f"gates.{gate}"
    for name in ("aggregate_speedup", "lower_bound", "learned_sd"):
        if not _close(getattr(recorded, name), getattr(simulated, name)):
            return name
    return "noise_dof" if recorded.noise_dof != simulated.noise_dof else None


def recorded_view(record: ExperimentRecord) -> DecisionView:
    assert record.decision is not None
    statistics = record.statistics
    noise = statistics.get("between_run_noise") or {}
    gates = record.decision.gates
    if record.decision.status is DecisionStatus.FAILED and gates == {"correct": False}:
        gates = {UNFINISHED_GATE: False}  # recorded before an unfinished run had its own gate: the same decision
    return DecisionView(status=record.decision.status, gates=gates,
                        aggregate_speedup=record.aggregate_speedup, lower_bound=statistics.get("lower_bound"),
                        learned_sd=noise.get("learned_sd"), noise_dof=noise.get("dof"), reason=record.decision.reason)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def gates_predated(record: ExperimentRecord) -> list[str]:
    """The gates of `GATES_SINCE` that this record's decision was taken without (a record that ran the noise
    test holds every gate of its day; one without a test, e.g. an incorrect candidate, predates nothing)."""
    gates = record.decision.gates if record.decision is not None else {}
    return [gate for gate in GATES_SINCE if "noise" in gates and gate not in gates]


@dataclass(frozen=True)
class _Inputs:
    """What one decision is taken with: the record's own values unless the policy overrides them."""

    budget: Budget
    confidence: float
    floor: float
    learned: bool  # noise learnt from the run's history (else the floor and the trial's own spread)
    per_case: bool  # learnt per case (else the noisiest case's for every case, as records before `by_case`)
    seed: int | None
    veto: str | None


class _Replay:
    def __init__(self, experiments: Sequence[ExperimentRecord], cases: Sequence[Case], settings: RecordedSettings,
                 policy: Policy, *, new_gates_off: bool = False) -> None:
        self.cases = list(cases)
        self.settings = settings
        self.policy = policy
        self.new_gates_off = new_gates_off  # decide records as of their day: the gates they predate off
        self.schedule = measurement_schedule(settings.schedule)
        self.history = RunMedians()
        self.digests = {e.experiment_id: e.normalized_sha256 or f"experiment:{e.experiment_id}" for e in experiments}
        recorded = [e.statistics for e in experiments if e.statistics]
        self.run_confidence = _first(*(s.get("confidence") for s in recorded), 0.99)
        self.run_learns = any("between_run_noise" in s for s in recorded)

    def digest(self, experiment_id: str | None, notes: list[str]) -> str:
        if experiment_id not in self.digests:
            notes.append(f"no record of {experiment_id!r}: its runs are grouped apart in the noise history")
        return self.digests.get(experiment_id or "", f"experiment:{experiment_id}")

    def add_history(self, digests: dict[str, str], evaluations: Sequence[Evaluation]) -> None:
        """Runs the referee did not measure (the baseline, runs of records not decided again, pairs a policy
        does not ask for): the run measured them all the same, and later decisions learnt from them."""
        for evaluation in evaluations:
            if evaluation.label in BENCHMARKED_LABELS:
                self.history = self.history.with_run(digests.get(evaluation.label, "unknown"), evaluation)

    def inputs(self, record: ExperimentRecord) -> _Inputs:
        statistics, policy = record.statistics, self.policy
        recorded_noise = statistics.get("between_run_noise") or {}
        veto = None
        if record.decision is not None and record.decision.gates.get("profile") is False:
            reason = record.decision.reason
            veto = reason.removeprefix(VETO) if reason.startswith(VETO) else "the recorded profile gate failed"
        predated = gates_predated(record)
        case_regression = _first(policy.max_case_regression, self.settings.max_case_regression,
                                 Budget().max_case_regression)
        if self.new_gates_off and "case_regression" in predated:
            case_regression = GATES_SINCE["case_regression"]
        return _Inputs(
            budget=Budget(min_speedup=_first(policy.min_speedup, statistics.get("min_speedup"), self.settings.min_speedup),
                          max_cv=_first(policy.max_cv, self.settings.max_cv), max_case_regression=case_regression),
            confidence=_first(policy.confidence, statistics.get("confidence"), self.run_confidence),
            # before the run learnt its noise a record had only a floor: the default, or `noise_floor` once the
            # run raised it from its history
            floor=_first(policy.noise_floor, recorded_noise.get("floor"), statistics.get("noise_floor"),
                         DEFAULT_NOISE_FLOOR),
            learned=policy.noise_model == "learned" or policy.noise_model == "recorded" and (
                "between_run_noise" in statistics if statistics else self.run_learns),
            per_case=policy.noise_model == "learned" or "by_case" in recorded_noise,
            seed=recorded_seed(statistics), veto=veto)

    def experiment(self, record: ExperimentRecord) -> ExperimentReplay:
        role = "final" if record.is_revalidation else "candidate"
        measured = [e for e in record.evaluations if e.label in (role, "incumbent")]
        recorded = recorded_view(record)
        if not any(e.label == role for e in measured):
            return ExperimentReplay(experiment_id=record.experiment_id, replayed=False, recorded=recorded,
                                    simulated=recorded, match=True, carried=["decision (no measurement)"])
        notes: list[str] = []
        carried: list[str] = []
        digests = {role: self.digest(record.experiment_id, notes),
                   "incumbent": self.digest("baseline" if role == "final" else record.parent_id, notes)}
        try:
            view = self.replay_decision(record, role, measured, digests, carried, notes)
        except _NotReplayable as exc:
            self.add_history(digests, measured)  # the run measured them all the same
            view = None
            notes.append(f"not decided again: {exc}")
        difference = first_difference(recorded, view) if view is not None else "records"
        return ExperimentReplay(experiment_id=record.experiment_id, replayed=True, recorded=recorded, simulated=view,
                                match=difference is None, first_difference=difference, carried=carried, notes=notes,
                                new_gates=gates_predated(record))

    def replay_decision(self, record: ExperimentRecord, role: str, measured: list[Evaluation], digests: dict[str, str],
               carried: list[str], notes: list[str]) -> DecisionView:
        # a triaging run measured each candidate first once the incumbent had a run, and a candidate
        # its first run rejected in that run alone
        triaged = self.settings.triage and role == "candidate" and bool(measured) and measured[0].label == role
        medians_only = any(samples_dropped(e) for e in measured)
        given = self.inputs(record)
        rules = Rules(cases=tuple(self.cases), budget=given.budget, confidence=given.confidence,
                      schedule=tuple(self.schedule), confirm_pairs=self.settings.confirm_pairs or 0,
                      noise=NoiseRule(floor=given.floor, learned=given.learned, per_case=given.per_case),
                      triage=self.settings.triage, reuse_incumbent_run=self.settings.reuse_incumbent_run)
        referee = Referee(rules)
        state = referee.start(role=Role(role), test_seed=given.seed or 0, history=self.history,
                             digests=(digests[role], digests["incumbent"]), carried_veto=given.veto,
                             carried_noise_gate=bool(record.statistics.get("passes_noise")) if medians_only else None)
        # the referee picks the schedule a triaging run measured: B/A/B, or B/A after the reused incumbent run
        schedule = list(state.schedule) if triaged else self.schedule
        if triaged and record.decision is not None and record.decision.gates.get(TRIAGE_GATE) is False:
            schedule = schedule[:1]
        try:
            initial, pairs = split_runs(measured, schedule, role)
        except ValueError as exc:
            raise _NotReplayable(str(exc)) from None
        # as many pairs as the record holds, unless the run's setting is known (the start asked for none)
        referee = Referee(dataclasses.replace(rules, confirm_pairs=_first(self.settings.confirm_pairs, len(pairs))))
        if medians_only and pairs:
            raise _NotReplayable("the raw samples were dropped from this file, and the confirmation pairs were "
                                 "decided on noise tests that cannot be re-run")
        if medians_only and self.policy.changes_the_test:
            raise _NotReplayable("the raw samples were dropped from this file: a confidence or noise override "
                                 "needs the noise test re-run")
        if medians_only:
            carried.append("noise gate and lower bound (raw samples dropped from this file)")
            notes.append("per-case bounds from the run medians alone (the dropped samples' within-run noise is left "
                         "out, so they are narrower than a run's)")
            initial = [_one_sample_per_run(e) for e in initial]
            if state.reused_incumbent is not None:
                state = dataclasses.replace(state, reused_incumbent=_one_sample_per_run(state.reused_incumbent))
        if given.veto is not None:
            carried.append("profile veto")
        recorded = list(initial)
        remaining = list(pairs)
        while not isinstance(action := referee.next(state), Ruling):
            if not recorded:  # the referee asks for a confirmation pair, and one is recorded (`fits` said so)
                if not remaining:
                    raise _NotReplayable(f"the decision asks for a {action.role.value} run the record does not hold")
                recorded = remaining.pop(0)
            run = recorded.pop(0)
            # the recording's clock: time is left while the run measured more (another pair fits when it did)
            try:
                state = referee.measured(state, run, math.inf if recorded or remaining else 0.0)
            except ValueError as exc:  # the record measured in another order than this decision asks for
                raise _NotReplayable(str(exc)) from None
        ruling = action
        if ruling.confirmation_cut:
            notes.append("this policy would measure another confirmation pair; none is recorded")
        self.history = ruling.history
        if recorded:  # the decision ruled before the record's schedule ended (a policy that triages it)
            notes.append(f"{len(recorded)} recorded run(s) of the schedule not asked for by this policy")
            self.add_history(digests, recorded)  # measured all the same: later decisions learnt from them
        if remaining:
            notes.append(f"{len(remaining)} recorded confirmation pair(s) not asked for by this policy")
            for pair in remaining:  # measured all the same: later decisions learnt from them
                self.add_history(digests, pair)
        if ruling.verdict.test is not None and given.seed is None:
            notes.append("the record holds no test seed: the test ran with seed 0")
        return self.view(record, ruling.verdict, ruling.noise, given.learned, medians_only)

    @staticmethod
    def view(record: ExperimentRecord, verdict: Verdict, noise: BetweenRunNoise, learned: bool,
             medians_only: bool) -> DecisionView:
        status = verdict.decision.status
        if record.is_revalidation:  # the loop's revalidation: a promotion confirms the finalist
            status = DecisionStatus.REVALIDATED if status is DecisionStatus.PROMOTED else DecisionStatus.REJECTED
        tested = verdict.test is not None
        noted = tested or verdict.triage is not None  # the run records its noise next to a test or a triage
        lower_bound = verdict.test.lower_bound if tested else None
        return DecisionView(
            status=status, gates=verdict.decision.gates, aggregate_speedup=verdict.aggregate_speedup,
            lower_bound=record.statistics.get("lower_bound") if medians_only and tested else lower_bound,
            learned_sd=noise.learned_sd if learned and noted else None,
            noise_dof=noise.dof if learned and noted else None,
            reason=None if medians_only else verdict.decision.reason)


def _replay_rows(experiments: Sequence[ExperimentRecord], cases: Sequence[Case], settings: RecordedSettings,
                 policy: Policy, notes: list[str], *, new_gates_off: bool = False) -> tuple[list[ExperimentReplay], str | None]:
    replay = _Replay(experiments, cases, settings, policy, new_gates_off=new_gates_off)
    rows: list[ExperimentReplay] = []
    diverges_at: str | None = None
    for record in experiments:
        if record.experiment_id == "baseline":
            replay.add_history({"baseline": replay.digests["baseline"]}, record.evaluations)
            continue
        if record.decision is None:
            notes.append(f"{record.experiment_id} has no decision (the run stopped while measuring it); skipped")
            continue
        row = replay.experiment(record)
        row.after_divergence = diverges_at is not None
        if diverges_at is None and row.simulated is not None and (
                (row.recorded.status in PROMOTING) != (row.simulated.status in PROMOTING)):
            diverges_at = row.experiment_id
        rows.append(row)
    return rows, diverges_at


def simulate_run(experiments: Sequence[ExperimentRecord], cases: Sequence[Case], *,
                 settings: RecordedSettings | None = None, policy: Policy | None = None) -> RunReplay:
    """Decide every experiment of a run again, in record order (the order the run measured them in), with
    today's gates; records that predate a gate are decided a second time without it, to check the rest."""
    settings = settings or RecordedSettings()
    policy = policy or Policy()
    notes: list[str] = []
    if settings.source == "defaults":
        notes.append(f"no run.json: max_cv {settings.max_cv}, schedule {settings.schedule!r} and the confirmation "
                     "pairs each record holds are taken as the run's settings")
    rows, diverges_at = _replay_rows(experiments, cases, settings, policy, notes)
    predating = [row for row in rows if row.new_gates]
    if predating:
        as_decided, _ = _replay_rows(experiments, cases, settings, policy, [], new_gates_off=True)
        by_id = {row.experiment_id: row for row in as_decided}
        for row in predating:
            row.reproduced_without_new_gates = by_id[row.experiment_id].match
        changed = [row.experiment_id for row in predating if not row.match and row.reproduced_without_new_gates]
        turned = [name for name in changed if (row := next(r for r in rows if r.experiment_id == name)).simulated
                  and (row.recorded.status in PROMOTING) != (row.simulated.status in PROMOTING)]
        gates = sorted({gate for row in predating for gate in row.new_gates})
        allowance = _first(policy.max_case_regression, settings.max_case_regression, Budget().max_case_regression)
        notes.append(f"{len(predating)} decision(s) were taken before the {', '.join(gates)} gate; they are decided "
                     f"again with it (max_case_regression {allowance:g}): it turns "
                     + (", ".join(turned) if turned else "no decision")
                     + (f" and fails on {', '.join(n for n in changed if n not in turned)}, rejected anyway"
                        if len(changed) > len(turned) else ""))
    reproduced = all(row.match or bool(row.reproduced_without_new_gates) for row in rows)
    return RunReplay(experiments=rows, all_match=all(row.match for row in rows), all_reproduced=reproduced,
                     policy=policy, settings=settings, diverges_at=diverges_at, notes=notes)
