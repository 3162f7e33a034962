"""The loop's state rebuilt from finished records, with the functions the live loop uses.

Noise: every benchmarked run of the records goes into `RunState.run_medians`, in the order it ran (records in
order, runs in order), under the digest of the source it measured. Incumbent: `promoted_incumbent` of the last
promotion. Where the rounds go on: the slot after the last recorded one. Refused sources: those of the records and
of screening.jsonl (`run/refusals.py`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.decision.timing_modes import learn_modes
from orchestrator.ledger.evaluations import FinishedEvaluation
from orchestrator.run.refusals import refusals_in, screening_refusals
from orchestrator.run.resume.record import RecordedRun, seconds_spent
from orchestrator.run.state import Incumbent, RunState, promoted_incumbent
from protocol.results import DecisionStatus, Evaluation, ExperimentRecord
from protocol.roles import Role


def _promoted(record: ExperimentRecord) -> bool:
    return record.decision is not None and record.decision.status is DecisionStatus.PROMOTED


def measured_digest(record: ExperimentRecord, evaluation: Evaluation, by_id: dict[str, ExperimentRecord]) -> str:
    """The normalized digest of the source an evaluation of `record` ran: the incumbent side is the parent
    (the baseline for the finalist), every other run is the record's own source."""
    if evaluation.label != Role.INCUMBENT.value:
        return record.normalized_sha256
    incumbent_id = "baseline" if record.is_revalidation else record.parent_id or "baseline"
    incumbent = by_id.get(incumbent_id)
    return incumbent.normalized_sha256 if incumbent else ""


def rebuild_state(run_id: str, experiments: Sequence[ExperimentRecord]) -> RunState:
    """RunState as the live loop left it after the last finished record (deadline set by the caller)."""
    state = RunState(run_id=run_id, started=time.monotonic(), deadline=0.0, experiments=list(experiments))
    by_id = {record.experiment_id: record for record in experiments}
    for record in experiments:
        duplicate = record.decision is not None and record.decision.status is DecisionStatus.DUPLICATE
        if not record.is_revalidation and record.normalized_sha256 and not duplicate:
            state.seen_digests[record.normalized_sha256] = record.experiment_id
        if record.source_path and record.source_sha256:
            state.written_sources[record.source_path] = record.source_sha256
        for evaluation in record.evaluations:
            if evaluation.label in {role.value for role in Role if role.decides}:
                digest = measured_digest(record, evaluation, by_id)
                if digest:
                    state.run_medians = state.run_medians.with_run(digest, evaluation)
                learn_modes(state.timing_modes, evaluation)
    state.refused = refusals_in(experiments)
    baseline = by_id.get("baseline")
    if baseline is not None and baseline.evaluations:
        state.device = baseline.evaluations[0].worker.device
        state.worker_isolation = dict(baseline.evaluations[0].worker.isolation)
        state.worker_versions = dict(baseline.evaluations[0].worker.versions)
    return state


def next_slot(experiments: Sequence[ExperimentRecord], candidates_per_round: int) -> tuple[int, int]:
    """(round, slot) of the first candidate without a record."""
    candidates = [r for r in experiments if r.round_index >= 1]
    if not candidates:
        return 1, 0
    last = max(candidates, key=lambda r: (r.round_index, r.slot_index))
    if last.slot_index + 1 < candidates_per_round:
        return last.round_index, last.slot_index + 1
    return last.round_index + 1, 0


def rounds_without_promotion(experiments: Sequence[ExperimentRecord], before_round: int) -> int:
    """The loop's count of consecutive rounds without a promotion, after the rounds before `before_round`."""
    count = 0
    for round_index in range(1, before_round):
        promoted = any(_promoted(r) for r in experiments if r.round_index == round_index)
        count = 0 if promoted else count + 1
    return count


@dataclass(frozen=True)
class IncumbentChoice:
    """The last promotion overall (the rounds go on against it) and before a round (its proposals saw it)."""

    current: ExperimentRecord | None
    at_round_start: ExperimentRecord | None


def choose_incumbents(experiments: Sequence[ExperimentRecord], round_index: int) -> IncumbentChoice:
    promoted = [r for r in experiments if _promoted(r) and r.round_index >= 1]
    before = [r for r in promoted if r.round_index < round_index]
    return IncumbentChoice(promoted[-1] if promoted else None, before[-1] if before else None)


def incumbent_of(record: ExperimentRecord | None, baseline: Incumbent) -> Incumbent:
    """The incumbent a promoted record made (its recorded source, checked against the record), or the baseline."""
    if record is None:
        return baseline
    path = Path(record.source_path)
    return promoted_incumbent(record, path.read_text(encoding="utf-8"), path)


@dataclass
class Resumption:
    """Everything the loop needs to go on: the record, the rebuilt state and where the rounds resume."""

    recorded: RecordedRun
    state: RunState
    seconds_left: float
    next_slot: tuple[int, int]
    screenings: int  # screening ids already used (screening/sNNN), so new ones stay unique
    # finished evaluations of experiments that had not finished, by (experiment id, tag): taken, not run again
    reusable: dict[tuple[str, str], FinishedEvaluation] = field(default_factory=dict)

    def record(self, experiment_id: str) -> ExperimentRecord | None:
        return next((r for r in self.state.experiments if r.experiment_id == experiment_id), None)


def resumption(recorded: RecordedRun, max_total_seconds: float, candidates_per_round: int) -> Resumption:
    state = rebuild_state(recorded.manifest.run_id, recorded.experiments)
    round_index, slot = next_slot(recorded.experiments, candidates_per_round)
    state.rounds_without_promotion = rounds_without_promotion(recorded.experiments, round_index)
    for digest, why in screening_refusals(recorded.output_dir).items():
        state.refused.setdefault(digest, why)
    screening = recorded.output_dir / "screening"
    screenings = len([p for p in screening.iterdir() if p.is_dir()]) if screening.is_dir() else 0
    return Resumption(recorded=recorded, state=state,
                      seconds_left=max(0.0, max_total_seconds - seconds_spent(recorded.journal)),
                      next_slot=(round_index, slot), screenings=screenings)
