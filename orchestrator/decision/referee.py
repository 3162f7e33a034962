"""One decision as a pure state machine: measurements in, the next action out.

Long because: the whole sequence below is one machine whose steps hand each other the state; split across
modules, each step would import the others back.

A candidate (or, at revalidation, the finalist) is decided in one sequence, the same in a live run, in a replay of
its records (`simulate.py`) and in a measurement study's trials (`study.py`):

1. its runs and the incumbent's in the `--schedule` order (A/B/A by default), so clock and thermal drift hit both
   sides; a failed candidate run ends the measuring (the incumbent runs after it would decide nothing). With
   triage (`--triage`, on by default) a candidate whose incumbent already has a run in the history is measured
   first, B/A/B: its first run alone rejects it when it is slower than the incumbent's last run by more than a
   margin that drift and the learnt noise cannot explain (`gates.triage`), so most losing candidates cost one
   worker instead of three; triage never promotes. With `reuse_incumbent_run` as well, that last incumbent run
   (the one triage compared with, ended before the candidate's first run began) is the decision's first A, and
   one more incumbent run after the candidate's closes the A/B/A: two workers, not three;
2. the verdict (`gates.decide`) on those runs, with the between-run noise learnt from every run of the history
   and of this decision so far (`noise.RunMedians`);
3. confirmation: while only the noise gate holds the candidate back, or a protected case may be slower within
   its noise (`gates.needs_confirmation`), one more candidate run and one more incumbent run, and the verdict
   again on all of them, up to `confirm_pairs`, each pair only if two more runs as long as the longest so far fit
   in the time left; a failed run of a pair ends the confirmation with the verdict as it stood. An A/B/A triple
   gives the test three runs; when between-process drift is large (0.8 % was seen on the H200 for a 1.4 ms
   matmul) a real 3 % gain can sit inside that noise: rejecting it throws the gain away, promoting it would be a
   guess. The A/A false-promotion rate this adds is small because only candidates whose point estimate already
   reaches the minimum speedup are extended (`tests/test_confirmation.py`, the measurement studies);
4. profile evidence (`evidence.py`), judged only where the run profiles: a candidate's runs are not profiled
   (on the H200 a summary profile, Proton and NCU, took 24-27 s of a ~32 s worker, and most candidates are
   rejected), so a candidate the verdict does not promote is ruled on at once, and one it promotes gets its
   summary profile now, in a fresh worker that verifies it and profiles it on the same inputs, poison and flush
   (not benchmarked). With less time left than a profile takes (the untouched kernel's took), or a profile the
   run's time cuts, its profile is deferred, not failed: it is promoted on its runs, and as the finalist its
   revalidation's deep-profiled run is held to every veto below, against the untouched kernel's profile (a
   candidate that stretches its own time to dodge its profile meets it there, and a revalidation whose profile
   the reserve cannot take is not revalidated). Then a deep profile when the summary evidence calls for one and time is left, then the
   vetoes (required evidence missing or disagreeing with the benchmark's medians, an NCU regression, a speedup
   the profilers do not back, work moved out of `main_scope`); a veto decides again on every run. A candidate
   run recorded with its profiles (before they were taken after the verdict) is judged on them, as it was. The
   finalist's run brings its deep profile, and is held to the required evidence alone (to every veto when its
   promotion deferred its profile);
5. the ruling: promoted (the driver makes it the incumbent) or not; for the finalist, revalidated or rejected.

The referee never waits, reads a clock or touches a file. Its driver answers `Measure` with a run of one side in
a fresh worker (or the recorded run), `Profile` with a profile of the candidate in a fresh worker, and feeds each
back with the seconds left before the decision's deadline, until `next` gives the `Ruling`. Every state is a new
immutable `Judgement`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from orchestrator.decision import evidence as profile_evidence
from orchestrator.decision.evidence import DeepProfileCall, Evidence
from orchestrator.decision.gates import Verdict, decide, needs_confirmation, triage
from orchestrator.decision.noise import DEFAULT_NOISE_FLOOR, BetweenRunNoise, RunMedians
from orchestrator.decision.time_budget import FULL_DECISION_RUNS, pair_fits
from protocol.bundle import Budget, Case
from protocol.profile import CaseProfileComparison
from protocol.results import Decision, DecisionStatus, Evaluation, EvaluationStatus
from protocol.roles import Role

Side = Literal["candidate", "incumbent"]
PAIR_DOES_NOT_FIT = "two more runs do not fit before the deadline"
REUSED_INCUMBENT_NOTE = "status=reusing the incumbent's last run as the first of its A/B/A"
RUN_END_SLACK_SECONDS = 2.0  # a worker cut at the run's deadline is ended and reaped within this
# With triage, a candidate is measured first, then the incumbent, then the candidate again: as many workers as
# A/B/A for a candidate the first run does not reject, and as symmetric against drift.
TRIAGE_SCHEDULE: tuple[Side, ...] = ("candidate", "incumbent", "candidate")
# With triage and `reuse_incumbent_run`: the incumbent's last run, then the candidate, then the incumbent, in the
# order they ran; the first is reused, so the decision starts two workers.
REUSE_SCHEDULE: tuple[Side, ...] = ("candidate", "incumbent")


@dataclass(frozen=True)
class NoiseRule:
    """How a decision estimates the between-run noise. A run learns it from its history, each case its own
    (`per_case`; before that existed, the noisiest case's for every case); `learned=False` is the floor alone
    (with each trial's own spread); `given` is a noise fixed from outside (a study's incumbent variant)."""

    floor: float = DEFAULT_NOISE_FLOOR
    learned: bool = True
    per_case: bool = True
    given: BetweenRunNoise | None = None

    def estimate(self, history: RunMedians, confidence: float) -> BetweenRunNoise:
        if self.given is not None:
            return self.given
        if not self.learned:
            return BetweenRunNoise(floor=self.floor)
        learned = history.noise(confidence=confidence, floor=self.floor)
        return learned if self.per_case else dataclasses.replace(learned, by_case={})


@dataclass(frozen=True)
class Rules:
    """What decisions are taken with: a run's settings (a replay takes each record's own)."""

    cases: tuple[Case, ...]
    budget: Budget
    confidence: float = 0.99
    schedule: tuple[Side, ...] = ("incumbent", "candidate", "incumbent")
    confirm_pairs: int = 2
    noise: NoiseRule = NoiseRule()
    # a candidate first, its run compared with the incumbent's last run in the history: one that loses clearly is
    # rejected on that one run (`gates.triage`); any other is measured in TRIAGE_SCHEDULE. Candidates only (a
    # finalist is revalidated in `schedule`), and only once the incumbent has a run in the history.
    triage: bool = False
    # with triage, the incumbent's last run in the history is the decision's first incumbent run (REUSE_SCHEDULE)
    reuse_incumbent_run: bool = False

    @property
    def full_decision_runs(self) -> int:
        """The new workers a candidate costs when its first run does not settle it (confirmation pairs aside):
        what the run expects the next candidate to take."""
        return len(REUSE_SCHEDULE) if self.triage and self.reuse_incumbent_run else FULL_DECISION_RUNS

    def __post_init__(self) -> None:
        if "candidate" not in self.schedule:
            raise ValueError(f"schedule {self.schedule} never measures the candidate")


@dataclass(frozen=True)
class Measure:
    """Run one side once in a fresh worker; feed the evaluation to `Referee.measured`."""

    side: Side
    role: Role  # the worker's role: the decision's own (candidate, final) or the incumbent
    index: int  # the run's position among the decision's runs (its worker's tag: "<index>-<role>")
    profile_level: str | None  # the profile the run brings along: the finalist's deep one, none for the others
    pair: int = 0  # 0: a run of the schedule; n: a run of the n-th confirmation pair
    notes: tuple[str, ...] = ()  # what the referee decided since the last action, for the live log


@dataclass(frozen=True)
class Profile:
    """Profile the candidate in a fresh worker (verified, not benchmarked); feed it to `Referee.profiled`. Its
    role says which: `profile`, the summary evidence of a candidate promoted on its runs; `deep_profile`, the
    deeper one that evidence calls for."""

    level: str
    reasons: tuple[str, ...]
    role: Role
    notes: tuple[str, ...] = ()


Asked = TypeVar("Asked", Measure, Profile)  # the actions a driver answers with an evaluation


@dataclass(frozen=True)
class Ruling:
    """The decision, and everything it was taken on."""

    role: Role
    verdict: Verdict
    noise: BetweenRunNoise  # the noise of the last verdict
    runs: tuple[Evaluation, ...]  # the schedule's runs and the confirmation pairs, in the order they ran
    profile: Evaluation | None  # the candidate's profile taken after a promoting verdict
    deep_profile: Evaluation | None
    history: RunMedians  # the history the decision started from, with its runs
    profiles: dict[str, CaseProfileComparison] | None  # what the profile evidence compared (None: not judged)
    pairs: int  # confirmation pairs started
    confirmation_cut: bool  # another pair was wanted and did not fit in the time left
    verdicts: tuple[Verdict, ...]  # every verdict on the way: the first, one per pair, the veto's
    notes: tuple[str, ...] = ()
    profile_deferred: bool = False  # promoted with its profile left to its revalidation (no time for it here)
    # the incumbent's last run before this decision, decided on as its first incumbent run (not in `runs`: an
    # earlier decision's worker measured it)
    reused_incumbent: Evaluation | None = None

    @property
    def evaluations(self) -> list[Evaluation]:
        """What the experiment's record holds: the runs, then the profile, then the deep profile."""
        return [*self.runs, *(e for e in (self.profile, self.deep_profile) if e is not None)]

    @property
    def promoted(self) -> bool:
        return self.verdict.decision.status is DecisionStatus.PROMOTED

    @property
    def decision(self) -> Decision:
        """The record's decision: the verdict's; for the finalist, revalidated when it would be promoted."""
        if self.role is not Role.FINAL:
            return self.verdict.decision
        return Decision(status=DecisionStatus.REVALIDATED if self.promoted else DecisionStatus.REJECTED,
                        reason=self.verdict.decision.reason, gates=self.verdict.decision.gates)


Action = Measure | Profile | Ruling


@dataclass(frozen=True)
class Judgement:
    """The state of one decision: its fixed inputs, what was measured, and the action it waits on."""

    role: Role
    test_seed: int
    digests: tuple[str, str]  # the normalized digests of the candidate's and the incumbent's source
    history: RunMedians
    schedule: tuple[Side, ...] = ()  # this decision's order of runs: the rules' own, or TRIAGE_SCHEDULE
    triage_against: dict[str, float] | None = None  # the incumbent's last run (case -> median) when triaging
    reused_incumbent: Evaluation | None = None  # that run, whole, when the decision reuses it (REUSE_SCHEDULE)
    evidence: Evidence | None = None  # None: no profile evidence judged
    carried_veto: str | None = None  # a veto taken as given (a replay carries the recorded one)
    carried_noise_gate: bool | None = None  # a noise gate taken as given (records without raw samples)
    profile_seconds: float = 0.0  # what a candidate's profile is expected to take (the untouched kernel's)
    # a candidate: promoted with its profile left to its revalidation; a finalist: its promotion deferred its
    # profile, so its deep-profiled run is held to every candidate veto
    profile_deferred: bool = False
    runs: tuple[Evaluation, ...] = ()
    candidate: Evaluation | None = None  # the schedule's last candidate run
    profile: Evaluation | None = None  # the candidate's profile taken after the verdict
    deep_profile: Evaluation | None = None
    seconds_left: float = math.inf
    pairs: int = 0
    confirmation_cut: bool = False
    verdict: Verdict | None = None
    noise: BetweenRunNoise | None = None
    verdicts: tuple[Verdict, ...] = ()
    deep_call: DeepProfileCall | None = None
    profiles: dict[str, CaseProfileComparison] | None = None
    action: Action | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Referee:
    rules: Rules

    def start(self, *, role: Role, test_seed: int, history: RunMedians, digests: tuple[str, str],
             evidence: Evidence | None = None, carried_veto: str | None = None,
             carried_noise_gate: bool | None = None, profile_seconds: float = 0.0,
             profile_deferred: bool = False) -> Judgement:
        """A decision about to measure its first run. `role`: candidate, or final at revalidation.
        `profile_seconds`: what a candidate's profile is expected to take; `profile_deferred` (a finalist only):
        its promotion left its profile to this revalidation."""
        if role not in (Role.CANDIDATE, Role.FINAL):
            raise ValueError(f"a referee decides candidates and finalists, not {role.value!r} runs")
        if profile_deferred and role is not Role.FINAL:
            raise ValueError("only a finalist's revalidation takes a profile its promotion deferred")
        last_incumbent_run = history.last_run(digests[1]) if self.rules.triage and role is Role.CANDIDATE else {}
        reused = None
        if last_incumbent_run and self.rules.reuse_incumbent_run:
            reused = reusable_run(history.last_evaluation(digests[1]), self.rules.cases)
        schedule = REUSE_SCHEDULE if reused else TRIAGE_SCHEDULE if last_incumbent_run else self.rules.schedule
        state = Judgement(role=role, test_seed=test_seed, digests=digests, history=history, schedule=schedule,
                          triage_against=last_incumbent_run or None, reused_incumbent=reused, evidence=evidence,
                          carried_veto=carried_veto, carried_noise_gate=carried_noise_gate,
                          profile_seconds=max(profile_seconds, 0.0), profile_deferred=profile_deferred)
        notes = (REUSED_INCUMBENT_NOTE,) if reused else ()
        return dataclasses.replace(state, action=self._measure(state, state.schedule[0], pair=0, notes=notes))

    def next(self, state: Judgement) -> Action:
        """What the decision needs next: a measurement, a deep profile, or nothing more (the ruling)."""
        assert state.action is not None
        return state.action

    def measured(self, state: Judgement, evaluation: Evaluation, seconds_left: float) -> Judgement:
        """The decision with the run its `Measure` asked for."""
        asked = _asked(state, Measure, evaluation, "run")
        digest = state.digests[0 if asked.side == "candidate" else 1]
        state = dataclasses.replace(
            state, runs=(*state.runs, evaluation), history=state.history.with_run(digest, evaluation),
            seconds_left=seconds_left, action=None,
            candidate=evaluation if asked.side == "candidate" and not asked.pair else state.candidate)
        failed = evaluation.status is not EvaluationStatus.OK
        schedule = state.schedule
        if not asked.pair:
            if state.triage_against is not None and len(state.runs) == 1:
                triaged = self._triaged(state, evaluation)
                if triaged is not None:
                    return triaged
            if len(state.runs) < len(schedule) and not (asked.side == "candidate" and failed):
                return self._ask(state, self._measure(state, schedule[len(state.runs)], pair=0, notes=()))
            return self._confirm(self._decided(state), ())
        if failed:  # a failed run decides nothing more: the verdict stands as it was
            return self._evidence(state, ())
        if asked.side == "candidate":
            return self._ask(state, self._measure(state, "incumbent", pair=asked.pair, notes=()))
        return self._confirm(self._decided(state), ())

    def profiled(self, state: Judgement, evaluation: Evaluation, seconds_left: float) -> Judgement:
        """The decision with the profile its `Profile` asked for."""
        asked = _asked(state, Profile, evaluation, "profile")
        state = dataclasses.replace(state, seconds_left=seconds_left, action=None)
        if asked.role is Role.PROFILE:
            state = dataclasses.replace(state, profile=evaluation)
            # the profile worker's deadline is the run's: one that ends with no time left was cut by it, and one
            # that left a protected case unprofiled for want of time was cut too; neither fails the candidate
            cut = profile_evidence.cut_by_run_time(self.rules.cases, evaluation,
                                                   run_time_out=seconds_left <= RUN_END_SLACK_SECONDS)
            if cut:
                return self._defer(state, (profile_evidence.deferred_line(cut),))
            veto = profile_evidence.failed_profile_veto(evaluation)
            return self._rule(state, veto, ()) if veto else self._call_deep(state, ())
        assert state.deep_call is not None
        return self._judge_profiles(dataclasses.replace(state, deep_profile=evaluation), state.deep_call, ())

    # ---- the steps between two actions -------------------------------------------------------------------

    @staticmethod
    def _ask(state: Judgement, action: Action) -> Judgement:
        return dataclasses.replace(state, action=action)

    def _measure(self, state: Judgement, side: Side, *, pair: int, notes: tuple[str, ...]) -> Measure:
        if side == "incumbent":
            return Measure("incumbent", Role.INCUMBENT, len(state.runs), None, pair, notes)
        level = "deep" if state.role is Role.FINAL and not pair else None
        return Measure("candidate", state.role, len(state.runs), level, pair, notes)

    def _triaged(self, state: Judgement, first: Evaluation) -> Judgement | None:
        """The decision ruled on the candidate's first run alone, when triage rejects it; else None."""
        assert state.triage_against is not None
        noise = self.rules.noise.estimate(state.history, self.rules.confidence)
        verdict = triage(self.rules.cases, first, state.triage_against, self.rules.budget, noise)
        if verdict is None:
            return None
        state = dataclasses.replace(state, verdict=verdict, noise=noise, verdicts=(verdict,))
        return self._evidence(state, (f"status=triaged reason={verdict.decision.reason!r}",))

    def _verdict(self, state: Judgement, noise: BetweenRunNoise, veto: str | None = None) -> Verdict:
        rules = self.rules
        incumbents = [e for e in state.runs if e.label == Role.INCUMBENT.value]
        verdict = decide(rules.cases, [e for e in state.runs if e.label == state.role.value],
                         [state.reused_incumbent, *incumbents] if state.reused_incumbent else incumbents, rules.budget,
                         profile_veto=veto, test_seed=state.test_seed, confidence=rules.confidence, noise=noise)
        if state.carried_noise_gate is None:
            return verdict
        return with_noise_gate(verdict, state.carried_noise_gate)

    def _decided(self, state: Judgement) -> Judgement:
        noise = self.rules.noise.estimate(state.history, self.rules.confidence)
        verdict = self._verdict(state, noise)
        return dataclasses.replace(state, verdict=verdict, noise=noise, verdicts=(*state.verdicts, verdict))

    def _confirm(self, state: Judgement, notes: tuple[str, ...]) -> Judgement:
        assert state.verdict is not None
        if state.pairs >= self.rules.confirm_pairs or not needs_confirmation(state.verdict):
            return self._evidence(state, notes)
        if not pair_fits(state.seconds_left, state.runs):
            return self._evidence(dataclasses.replace(state, confirmation_cut=True),
                                  (*notes, f"status=confirming skipped: {PAIR_DOES_NOT_FIT}"))
        pair = state.pairs + 1
        note = f"status=confirming pair={pair}/{self.rules.confirm_pairs} reason={state.verdict.decision.reason!r}"
        state = dataclasses.replace(state, pairs=pair)
        return self._ask(state, self._measure(state, "candidate", pair=pair, notes=(*notes, note)))

    def _evidence(self, state: Judgement, notes: tuple[str, ...]) -> Judgement:
        assert state.verdict is not None and state.candidate is not None
        evidence, candidate, verdict = state.evidence, state.candidate, state.verdict
        if state.carried_veto is not None:
            return self._rule(state, state.carried_veto, notes)
        if evidence is None or candidate.status is not EvaluationStatus.OK:
            return self._rule(state, None, notes)
        if state.role is Role.FINAL:
            if state.profile_deferred:  # its promotion had no profile: this one is judged as a candidate's
                call = profile_evidence.deep_profile_call(self.rules.cases, evidence, candidate, verdict,
                                                          self.rules.budget.min_speedup)
                return self._judge_profiles(dataclasses.replace(state, deep_call=call), call,
                                            (*notes, profile_evidence.DEFERRED_PROFILE_JUDGED))
            return self._rule(state, profile_evidence.evidence_veto(self.rules.cases, evidence.required, candidate,
                                                                    verdict), notes)
        if profile_evidence.carries_profiles(candidate):  # a run recorded with its profiles: judged on them
            return self._call_deep(state, notes)
        if verdict.decision.status is not DecisionStatus.PROMOTED:
            return self._rule(state, None, (*notes, profile_evidence.profile_line(
                False, profile_evidence.NO_PROFILE_FOR_REJECTION)))
        if state.seconds_left <= 0 or state.seconds_left < state.profile_seconds:
            return self._defer(state, (*notes, profile_evidence.deferred_line(
                profile_evidence.no_time_for_profile(state.seconds_left, state.profile_seconds))))
        why = profile_evidence.PROFILE_FOR_PROMOTION
        return self._ask(state, Profile("summary", ("promoted",), Role.PROFILE,
                                        (*notes, profile_evidence.profile_line(True, why))))

    def _defer(self, state: Judgement, notes: tuple[str, ...]) -> Judgement:
        """Promoted on its runs with its profile left to its revalidation: the run's time, not the candidate,
        kept it from being taken here."""
        return self._rule(dataclasses.replace(state, profile_deferred=True), None, notes)

    def _call_deep(self, state: Judgement, notes: tuple[str, ...]) -> Judgement:
        """The summary evidence read against the verdict: a deep profile when it calls for one and time is left."""
        assert state.evidence is not None and state.candidate is not None and state.verdict is not None
        min_speedup = self.rules.budget.min_speedup
        call = profile_evidence.deep_profile_call(self.rules.cases, state.evidence, self._profiled(state),
                                                  state.verdict, min_speedup)
        state = dataclasses.replace(state, deep_call=call)
        if call.reasons and state.seconds_left > 0:
            return self._ask(state, Profile("deep", call.reasons, Role.DEEP_PROFILE, (*notes, call.taken_line())))
        return self._judge_profiles(state, call,
                                    (*notes, profile_evidence.deep_profile_skipped_line(state.verdict, min_speedup)))

    @staticmethod
    def _profiled(state: Judgement) -> Evaluation:
        """What brought the candidate's summary profiles: its profile after the verdict, or its recorded run."""
        profiled = state.profile or state.candidate
        assert profiled is not None
        return profiled

    def _judge_profiles(self, state: Judgement, call: DeepProfileCall, notes: tuple[str, ...]) -> Judgement:
        assert state.evidence is not None and state.candidate is not None and state.verdict is not None
        profiled = self._profiled(state)
        profiles = profile_evidence.compare_profiles(self.rules.cases, state.evidence, profiled, state.deep_profile)
        veto = profile_evidence.candidate_veto(self.rules.cases, state.evidence, state.candidate, state.verdict,
                                               profiles, call, profiled)
        return self._rule(dataclasses.replace(state, profiles=profiles), veto, notes)

    def _rule(self, state: Judgement, veto: str | None, notes: tuple[str, ...]) -> Judgement:
        assert state.verdict is not None and state.noise is not None
        verdict, verdicts = state.verdict, state.verdicts
        if veto is not None:  # decided again with the veto, on every run and the last noise
            verdict = self._verdict(state, state.noise, veto)
            verdicts = (*verdicts, verdict)
        state = dataclasses.replace(state, verdict=verdict, verdicts=verdicts)
        return self._ask(state, Ruling(
            role=state.role, verdict=verdict, noise=state.noise, runs=state.runs, profile=state.profile,
            deep_profile=state.deep_profile,
            history=state.history, profiles=state.profiles, pairs=state.pairs,
            confirmation_cut=state.confirmation_cut, verdicts=verdicts, notes=notes,
            profile_deferred=state.profile_deferred and state.role is Role.CANDIDATE,
            reused_incumbent=state.reused_incumbent))


def reusable_run(evaluation: Evaluation | None, cases: tuple[Case, ...]) -> Evaluation | None:
    """The incumbent's last run when a decision can take it as its first incumbent run: finished, correct and
    timed on every case; else None (the decision measures B/A/B)."""
    if evaluation is None or evaluation.status is not EvaluationStatus.OK:
        return None
    for case in cases:
        measured = evaluation.case(case.case_id)
        if measured is None or measured.stats is None or not measured.correct:
            return None
    return evaluation


def _asked(state: Judgement, action: type[Asked], evaluation: Evaluation, what: str) -> Asked:
    """The action `evaluation` answers; a driver feeding the decision out of turn is a bug, named here."""
    asked = state.action
    if not isinstance(asked, action):
        raise ValueError(f"no {what} was asked for (the decision waits on {type(asked).__name__})")
    if evaluation.label != asked.role.value:
        raise ValueError(f"a {asked.role.value} {what} was asked for, got a {evaluation.label!r} one")
    return asked


def with_noise_gate(verdict: Verdict, passes: bool) -> Verdict:
    """The verdict with a noise gate taken as given in place of the one decided (records that kept each run's
    statistics but not its samples decide every other gate again on the run medians; the test kept in the
    verdict only says that a test was run, and its reason, which may cite that test, is dropped)."""
    if verdict.test is None:
        return verdict
    gates = {**verdict.decision.gates, "noise": passes}
    status = DecisionStatus.PROMOTED if all(gates.values()) else DecisionStatus.REJECTED
    return Verdict(Decision(status=status, reason="", gates=gates), verdict.comparisons, verdict.aggregate_speedup,
                   verdict.test)

