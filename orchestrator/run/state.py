"""What a run knows while it runs: its records so far, the incumbent, and why it will stop."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.decision.evidence import profiled_run
from orchestrator.decision.noise import RunMedians
from protocol.outcome import ExitCode, StoppingReason
from protocol.results import Evaluation, ExperimentRecord
from protocol.roles import Role


class RunAborted(Exception):
    """Stops the run with an exit code and one message (bad baseline, tampered bundle, ...)."""

    def __init__(self, exit_code: ExitCode, message: str, stopping_reason: StoppingReason | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message
        self.stopping_reason = stopping_reason


@dataclass
class Incumbent:
    experiment_id: str
    source: str
    kernel_path: Path
    evaluation: Evaluation


def promoted_incumbent(record: ExperimentRecord, source: str, kernel_path: Path) -> Incumbent:
    """The incumbent a promoted record makes: its source and its first candidate run (the A/B/A one), with the
    profiles of its profile taken after the verdict (what the next candidates' profiles are compared with)."""
    evaluation = record.candidate_evaluation
    if evaluation is None:
        raise ValueError(f"{record.experiment_id} was promoted without a candidate run")
    profile = next((e for e in record.evaluations if e.label == Role.PROFILE.value), None)
    return Incumbent(record.experiment_id, source, kernel_path, profiled_run(evaluation, profile))


@dataclass
class RunState:
    run_id: str
    started: float
    deadline: float  # trio time
    experiments: list[ExperimentRecord] = field(default_factory=list)
    seen_digests: dict[str, str] = field(default_factory=dict)  # normalized digest -> experiment id
    # normalized digest -> why: sources compile ahead, a build or a screening refused (run/refusals.py)
    refused: dict[str, str] = field(default_factory=dict)
    # raw digest -> the screening whose compile ahead found that exact source within the device's limits: its
    # candidate is not compiled ahead again (run/ahead_step.py), and its kernels are in the run's kernel cache
    compiled_ahead: dict[str, str] = field(default_factory=dict)
    rounds_without_promotion: int = 0
    # the median of every benchmarked run of every source, per case: the history the noise is learnt from
    run_medians: RunMedians = field(default_factory=RunMedians)
    # path -> sha256 of every source the run wrote and will evaluate again (checked before each worker)
    written_sources: dict[str, str] = field(default_factory=dict)
    stopping_reason: StoppingReason = StoppingReason.ROUND_BUDGET_EXHAUSTED
    stopping_detail: str = ""  # one sentence for result.json: what ran out or failed, and what would change it
    # what the baseline's worker saw: the device and the isolation layers it ran under (for run.json)
    device: str | None = None
    worker_isolation: dict[str, Any] = field(default_factory=dict)
    worker_versions: dict[str, str | None] = field(default_factory=dict)  # the interpreter and packages it ran
    # why verdicts run in the candidate's process though the target asked for `auto` (worker/verdict_fallback.py)
    verdict_fallback: str = ""
    provider_explanation: dict[str, Any] | None = None  # from a ProviderExhausted that says why, for result.json
    # case id -> the timing mode the run's first measurement chose (decision/timing_modes.py)
    timing_modes: dict[str, str] = field(default_factory=dict)

    def stop(self, reason: StoppingReason, detail: str) -> None:
        """Record why the run stops, with the sentence a person reads in result.json; the reason and its
        detail are always set together, so a later stop never leaves an earlier stop's detail behind."""
        self.stopping_reason = reason
        self.stopping_detail = detail
