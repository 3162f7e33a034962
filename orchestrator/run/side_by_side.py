"""Candidate against incumbent in fresh workers, in the `--schedule` order, then the verdict.

Clock and thermal drift hit both sides because the incumbent is re-measured around the candidate (A/B/A by
default). While only the noise gate holds a candidate back, more candidate/incumbent pairs are measured
(`--confirm-runs`), each only if two more workers fit before the deadline.
"""

from __future__ import annotations

from pathlib import Path

import trio

from orchestrator.decision.confirmation import confirm_until_decided
from orchestrator.decision.gates import Verdict, decide
from orchestrator.decision.noise import BetweenRunNoise, noise_from_run_medians
from orchestrator.decision.time_budget import longest_worker_seconds
from orchestrator.run.evaluator import Evaluator
from orchestrator.run.ledger import reporting
from orchestrator.run.state import RunState
from protocol.results import Evaluation, EvaluationStatus
from protocol.roles import Role


class SideBySide:
    def __init__(self, evaluator: Evaluator, schedule: list[str]) -> None:
        self.evaluator = evaluator
        self.schedule = schedule
        self.config = evaluator.config

    async def measure(self, state: RunState, experiment_id: str, candidate_path: Path, incumbent_path: Path, *,
                      deadline: float, role: Role, profile_level: str | None, schedule: list[str] | None = None,
                      first_index: int = 0) -> tuple[list[Evaluation], Evaluation]:
        """The incumbent runs are skipped once the candidate has failed: they would decide nothing."""
        evaluations: list[Evaluation] = []
        candidate: Evaluation | None = None
        for index, side in enumerate(schedule or self.schedule, start=first_index):
            if side == "candidate":
                candidate = await self.evaluator.evaluate(
                    state, role=role, experiment_id=experiment_id, kernel_path=candidate_path,
                    tag=f"{index}-{role.value}", deadline=deadline, profile_level=profile_level,
                    profile_reason=role.value)
                evaluations.append(candidate)
                self.evaluator.log.event(reporting.evaluation_line(experiment_id, role.value, candidate))
                if candidate.status is not EvaluationStatus.OK:
                    break
            else:
                evaluations.append(await self.evaluator.evaluate(
                    state, role=Role.INCUMBENT, experiment_id=experiment_id, kernel_path=incumbent_path,
                    tag=f"{index}-incumbent", deadline=deadline))
        assert candidate is not None  # measurement_schedule guarantees a candidate slot
        return evaluations, candidate

    def noise(self, state: RunState) -> BetweenRunNoise:
        """Between-run noise learnt from every source measured more than once so far in this run."""
        return noise_from_run_medians(state.run_medians, confidence=self.config.confidence)

    def verdict(self, evaluations: list[Evaluation], role: Role, test_seed: int, noise: BetweenRunNoise,
                profile_veto: str | None = None) -> Verdict:
        return decide(self.evaluator.inputs.cases, [e for e in evaluations if e.label == role.value],
                      [e for e in evaluations if e.label == Role.INCUMBENT.value], self.config.budget,
                      profile_veto=profile_veto, test_seed=test_seed, confidence=self.config.confidence, noise=noise)

    async def judge(self, state: RunState, experiment_id: str, evaluations: list[Evaluation], candidate_path: Path,
                    incumbent_path: Path, *, deadline: float, role: Role,
                    test_seed: int) -> tuple[Verdict, BetweenRunNoise]:
        """Decide; appends the confirmation pairs it measured to `evaluations`."""
        noise = self.noise(state)
        verdict = self.verdict(evaluations, role, test_seed, noise)
        log = self.evaluator.log

        async def measure_pair(pair: int) -> bool:
            log.event(f"{experiment_id} status=confirming pair={pair}/{self.config.confirm_pairs} "
                      f"reason={verdict.decision.reason!r}")
            more, _ = await self.measure(state, experiment_id, candidate_path, incumbent_path, deadline=deadline,
                                         role=role, profile_level=None, schedule=["candidate", "incumbent"],
                                         first_index=len(evaluations))
            evaluations.extend(more)
            return all(e.status is EvaluationStatus.OK for e in more)

        def decide_again() -> Verdict:
            nonlocal noise, verdict
            noise = self.noise(state)
            verdict = self.verdict(evaluations, role, test_seed, noise)
            return verdict

        verdict, _pairs = await confirm_until_decided(
            verdict, max_pairs=self.config.confirm_pairs, measure_pair=measure_pair, decide_again=decide_again,
            can_afford_pair=lambda: deadline - trio.current_time() >= 2 * longest_worker_seconds(evaluations),
            on_skip=lambda why: log.event(f"{experiment_id} status=confirming skipped: {why}"))
        return verdict, noise
