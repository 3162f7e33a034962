"""The referee's driver in a live run: each run it asks for in a fresh worker, each profile, the live log.

The decision itself (schedule, verdict, confirmation pairs, profile evidence and vetoes) is the referee's
(`orchestrator/decision/referee.py`), the same that `tlx-agent simulate` feeds recorded runs to. This module only
answers it: a `Measure` is one evaluation of the candidate or the incumbent, a `Profile` one profile of the
candidate (verified, not benchmarked: its summary profile after a promoting verdict, or a deep one), each fed back
with the seconds left before the deadline; what the referee notes goes to the live log, and the profiles it
compared to the experiment's profile.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trio

from orchestrator.decision.evidence import Evidence
from orchestrator.decision.referee import Measure, NoiseRule, Profile, Referee, Rules, Ruling
from orchestrator.decision.schedule import measurement_schedule
from orchestrator.decision.time_budget import profile_cutoff, profile_seconds_by_case
from orchestrator.ledger import reporting
from orchestrator.ledger.artifacts import write_json
from orchestrator.run.evaluator import Evaluates
from orchestrator.run.state import RunState
from protocol.results import Evaluation
from protocol.roles import Role


@dataclass(frozen=True)
class Source:
    """One side of a decision: the file a worker runs and the normalized digest its runs are learnt under."""

    path: Path
    digest: str


def decision_rules(evaluator: Evaluates) -> Rules:
    """The run's rules: its cases, budget, confidence, `--schedule`, `--confirm-runs`, `--triage` and
    `--reuse-incumbent-run`; noise learnt per case."""
    config = evaluator.config
    return Rules(cases=tuple(evaluator.inputs.cases), budget=config.budget, confidence=config.confidence,
                 schedule=tuple(measurement_schedule(config.schedule)), confirm_pairs=config.confirm_pairs,
                 noise=NoiseRule(), triage=config.triage, reuse_incumbent_run=config.reuse_incumbent_run)


def profile_tag(role: Role) -> str:
    """The worker's tag of a profile: `profile` or `deep-profile` (a resumed run finds a finished one by it)."""
    return role.value.replace("_", "-")


class SideBySide:
    def __init__(self, evaluator: Evaluates) -> None:
        self.evaluator = evaluator
        self.referee = Referee(decision_rules(evaluator))

    async def decide(self, state: RunState, experiment_id: str, *, role: Role, candidate: Source, incumbent: Source,
                     deadline: float, test_seed: int, evidence: Evidence | None,
                     profile_deferred: bool = False) -> Ruling:
        """Measure what the referee asks for until it rules; the run's noise history then holds every run.
        `profile_deferred`: the finalist's promotion left its profile to this revalidation."""
        evaluator, log = self.evaluator, self.evaluator.log
        judgement = self.referee.start(
            role=role, test_seed=test_seed, history=state.run_medians, digests=(candidate.digest, incumbent.digest),
            evidence=evidence, profile_seconds=sum(profile_seconds_by_case(state.experiments).values()),
            profile_deferred=profile_deferred)
        while True:
            action = self.referee.next(judgement)
            for note in action.notes:
                log.event(f"{experiment_id} {note}")
            if isinstance(action, Ruling):
                break
            if isinstance(action, Profile):
                profile = await evaluator.evaluate(
                    state, role=action.role, experiment_id=experiment_id, kernel_path=candidate.path,
                    tag=profile_tag(action.role), deadline=deadline, profile_level=action.level,
                    profile_reason=",".join(action.reasons), benchmark=False, profile_until=deadline)
                log.event(reporting.evaluation_line(experiment_id, action.role.value, profile))
                judgement = self.referee.profiled(judgement, profile, deadline - trio.current_time())
                continue
            # the schedule's runs still to come after this one must fit after its profile
            remaining = len(judgement.schedule) - action.index - 1 if not action.pair else 0
            until = profile_cutoff(deadline, remaining, judgement.runs)
            judgement = self.referee.measured(judgement, await self.run(state, experiment_id, action, candidate,
                                                                        incumbent, deadline, until),
                                              deadline - trio.current_time())
        state.run_medians = action.history
        if action.profiles is not None:
            for case_id, comparison in action.profiles.items():
                deltas = {key: delta.model_dump() for key, delta in comparison.deltas.items()}
                log.event(f"{experiment_id} profile case={case_id} "
                          + reporting.format_profile_for_log(comparison.profile, deltas))
            write_json(evaluator.artifacts.experiment_dir(experiment_id) / "profile.json", action.profiles)
        return action

    async def run(self, state: RunState, experiment_id: str, measure: Measure, candidate: Source, incumbent: Source,
                  deadline: float, profile_until: float | None = None) -> Evaluation:
        """One run of one side in a fresh worker; a candidate's (or the finalist's) figures go to the live log.
        Its profile may take until `profile_until` (default: the deadline); one the run's time cuts is not taken."""
        if measure.side == "incumbent":
            return await self.evaluator.evaluate(
                state, role=Role.INCUMBENT, experiment_id=experiment_id, kernel_path=incumbent.path,
                tag=f"{measure.index}-incumbent", deadline=deadline)
        evaluation = await self.evaluator.evaluate(
            state, role=measure.role, experiment_id=experiment_id, kernel_path=candidate.path,
            tag=f"{measure.index}-{measure.role.value}", deadline=deadline, profile_level=measure.profile_level,
            profile_reason=measure.role.value, profile_until=profile_until)
        self.evaluator.log.event(reporting.evaluation_line(experiment_id, measure.role.value, evaluation))
        return evaluation


__all__ = ["SideBySide", "Source", "decision_rules", "profile_tag"]
