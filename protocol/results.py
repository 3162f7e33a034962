"""What a run writes: per-case measurements, experiments, and the run result."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import Field

from protocol.autotune import AutotuneActivity, AutotuneChoice, AutotuneRecord, FirstCall
from protocol.base import StrictModel
from protocol.outcome import ExitCode, StoppingReason
from protocol.worker import PidNamespace, ScreenedVariant


class EvaluationStatus(str, Enum):
    """How one worker evaluation ended: exactly one of these, with a one-line reason."""

    OK = "ok"
    BUILD_FAILED = "build_failed"
    INCORRECT = "incorrect"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    RESOURCE_LIMIT = "resource_limit"
    PROTOCOL_VIOLATION = "protocol_violation"
    SANDBOX_VIOLATION = "sandbox_violation"
    CHEAT_DETECTED = "cheat_detected"  # the judge caught it doing less, or other, work than it claimed


class DecisionStatus(str, Enum):
    BASELINE = "baseline"
    PROMOTED = "promoted"
    REJECTED = "rejected"
    FAILED = "failed"
    DUPLICATE = "duplicate"
    REVALIDATED = "revalidated"


class SampleStats(StrictModel):
    """Persisted so readers never recompute them from raw samples."""

    n: int
    median: float
    p95: float
    mean: float
    stdev: float
    cv: float
    min: float
    max: float


class CaseMeasurement(StrictModel):
    case_id: str
    protected: bool
    weight: float
    correct: bool | None = None
    diagnostics: str = ""
    metrics: dict[str, Any] = Field(default_factory=dict)
    samples_us: list[float] = Field(default_factory=list)
    stats: SampleStats | None = None
    warmup_count: int | None = None
    cache_policy: str | None = None
    profile: dict[str, Any] | None = None
    # why no profile of this case was taken though one was asked for: "budget" (the run's time ran out before it
    # finished, or was too short to start it); set by the orchestrator, never from what a worker sends
    profile_not_taken: str | None = None
    phase_seconds: dict[str, float] = Field(default_factory=dict)


class WorkerRecord(StrictModel):
    """Facts about the worker process that ran an evaluation."""

    pid: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    isolation: dict[str, str] = Field(default_factory=dict)
    versions: dict[str, str | None] = Field(default_factory=dict)
    device: str | None = None
    log_path: str | None = None
    log_bytes_dropped: int = 0
    wall_seconds: float = 0.0
    # where that time went, seconds per phase as the orchestrator saw them (orchestrator/worker/evaluation.py)
    phases: dict[str, float] = Field(default_factory=dict)
    leftover_processes_killed: int = 0
    pid_namespace: PidNamespace | None = None  # the worker's own PID namespace, when the processes layer is on
    verdict_process: str | None = None  # "judge" (verdicts outside the candidate's process) or "candidate"
    # set on a baseline run in the candidate's process because the judge could not take the untouched kernel
    verdict_fallback: str = ""
    # what Triton's autotuners did in the worker ("worker") and in a judge's candidate process, as the worker's
    # `finished` event said (protocol/autotune.py); None when the worker was given no autotune setup
    autotune: dict[str, AutotuneActivity] | None = None
    # compiled kernel groups the worker started with, kept from earlier workers of its exact source, and the new
    # ones it compiled that the run kept for later workers of that source (orchestrator/worker/kernel_cache.py)
    kernel_groups_given: int = 0
    kernel_groups_kept: int = 0
    # Triton launchers its judge built that the run kept for later workers (orchestrator/worker/launcher_store.py)
    launchers_kept: int = 0


class CommandSeed(StrictModel):
    """The seed one command of an evaluation was sent (64 bits from the orchestrator's CSPRNG), recorded once the
    evaluation is over: with the frozen harness it draws that command's inputs again."""

    phase: str
    case_id: str
    seed: int = Field(ge=0, lt=2**64)


class Evaluation(StrictModel):
    """One fresh-worker evaluation of one source over the cases."""

    label: str
    status: EvaluationStatus
    reason: str = ""
    cases: list[CaseMeasurement] = Field(default_factory=list)
    worker: WorkerRecord = Field(default_factory=WorkerRecord)
    seed: int = 0
    command_seeds: list[CommandSeed] = Field(default_factory=list)
    screening: list[ScreenedVariant] | None = None  # a screening worker's ranking input (never a verdict)
    # the trusted autotune step's choices, and a first-call measurement (orchestrator/autotune/)
    autotune_choices: list[AutotuneChoice] | None = None
    first_call: FirstCall | None = None

    def case(self, case_id: str) -> CaseMeasurement | None:
        return next((c for c in self.cases if c.case_id == case_id), None)


class FinishedEvaluation(StrictModel):
    """experiments/<id>/evaluations/<tag>.json: one evaluation written the moment it ended, with the source it
    measured, so that a resumed run takes it instead of running it again (orchestrator/ledger/evaluations.py)."""

    experiment_id: str
    tag: str
    label: str
    source_sha256: str
    evaluation: Evaluation


class CandidateMetadata(StrictModel):
    hypothesis: str = ""
    evidence: str = ""
    change: str = ""
    expected_effect: str = ""
    risk: str = ""


class CaseComparison(StrictModel):
    case_id: str
    incumbent_median_us: float | None
    candidate_median_us: float | None
    speedup: float | None
    candidate_cv: float | None
    incumbent_cv: float | None
    correct: bool | None


class Decision(StrictModel):
    status: DecisionStatus
    reason: str
    gates: dict[str, bool] = Field(default_factory=dict)


class RefusedProposal(StrictModel):
    """A proposal the run refused before any worker because what it proposes was already refused: its source
    (normalized digest) by compile ahead, a build or screening, or its configuration by the infeasible store."""

    normalized_sha256: str
    reason: str  # what refused it before, and where
    source_path: str = ""  # experiments/<id>/refused-<n>.py
    change: str = ""  # the provider's one-line description of it


class ExperimentRecord(StrictModel):
    experiment_id: str
    round_index: int = 0
    slot_index: int = 0
    parent_id: str | None = None
    source_sha256: str = ""
    normalized_sha256: str = ""
    source_path: str = ""
    incremental_patch_path: str | None = None
    cumulative_patch_path: str | None = None
    metadata: CandidateMetadata = Field(default_factory=CandidateMetadata)
    evaluations: list[Evaluation] = Field(default_factory=list)
    comparisons: list[CaseComparison] = Field(default_factory=list)
    aggregate_speedup: float | None = None
    statistics: dict[str, Any] = Field(default_factory=dict)
    decision: Decision | None = None
    wall_seconds: float = 0.0
    # proposals for this slot refused before any worker as already known to fail (orchestrator/run/refusals.py);
    # the provider was asked again after each
    refused_proposals: list[RefusedProposal] = Field(default_factory=list)
    # profiles its runs asked for that the run's time did not allow ("<label> run, case <id>: profile not taken:
    # budget ..."): where profile evidence is required the candidate is not promoted without it (not a failure:
    # its runs stay correct and measured)
    profiles_not_taken: list[str] = Field(default_factory=list)
    # promoted on its runs with no time left in the rounds for its profile: as the finalist, its revalidation's
    # deep-profiled run is held to every candidate veto (orchestrator/decision/referee.py)
    profile_deferred: bool = False

    @property
    def proposals_made(self) -> int:
        """The proposals the provider made for this slot: the refused ones, and its own unless the slot got
        none but refused ones (a duplicate record without a source)."""
        only_refused = self.decision is not None and self.decision.status is DecisionStatus.DUPLICATE \
            and not self.source_path
        return len(self.refused_proposals) + (0 if only_refused else 1)

    @property
    def candidate_evaluation(self) -> Evaluation | None:
        return next((e for e in self.evaluations if e.label == "candidate"), None)

    @property
    def is_revalidation(self) -> bool:
        return is_revalidation_id(self.experiment_id)


REVALIDATION_ID = "final"


def revalidation_id(attempt: int) -> str:
    """The experiment id of the n-th finalist's revalidation: `final`, then `final-2`, `final-3`, ... for the
    next-best finalists tried after a failed one (orchestrator/run/finalists.py)."""
    return REVALIDATION_ID if attempt <= 1 else f"{REVALIDATION_ID}-{attempt}"


def is_revalidation_id(experiment_id: str) -> bool:
    head, _, attempt = experiment_id.partition("-")
    return head == REVALIDATION_ID and (not attempt or attempt.isdigit())


class FinalistAttempt(StrictModel):
    """One finalist the run revalidated against fresh baseline runs, in the order they were tried: the last
    promotion first, then (after a failed revalidation, while time allowed) the next-best earlier promotion."""

    experiment_id: str  # the promoted candidate
    revalidation_id: str  # the experiment that revalidated it: final, final-2, ...
    status: Literal["revalidated", "rejected"]
    reason: str  # the revalidation's decision reason
    aggregate_speedup: float | None = None  # over the fresh baseline runs


class CaseReport(StrictModel):
    case_id: str
    weight: float
    protected: bool
    parameters: dict[str, Any]
    baseline_median_us: float | None
    final_median_us: float | None
    speedup: float | None
    baseline_cv: float | None
    final_cv: float | None
    correct: bool | None
    # how every worker of the run timed this case ("events", "cuda_graph", "cpu"), fixed by its first measurement
    timing_mode: str | None = None
    # what the final kernel (the baseline when there is none) achieved against the device's datasheet peaks and
    # the copy ceiling measured in the run (orchestrator/decision/physics.py); None without work figures
    achieved_bytes_per_s: float | None = None
    achieved_flop_per_s: float | None = None
    percent_of_memory_peak: float | None = None
    percent_of_flop_peak: float | None = None
    percent_of_copy_ceiling: float | None = None
    # a memory-bound case below 85 % of the copy ceiling: the limit that stops it, with its numbers
    # (orchestrator/decision/copy_gap.py); None when it reaches the ceiling or is not memory-bound
    copy_gap: str | None = None


class CommitRecord(StrictModel):
    status: Literal["committed", "failed", "skipped"]
    vcs: str | None = None
    revision: str | None = None
    base_revision: str | None = None
    repository: str | None = None
    file: str | None = None
    subject: str | None = None
    reason: str = ""
    kind: Literal["promotion", "final", "rollback"] = "promotion"
    experiment_id: str | None = None


class RunReport(StrictModel):
    """What a reader needs first: the workload, the device, before and after, why it stopped, the commit."""

    # what weakens this run's verdicts, said first: verdicts in the candidate's process, no physics check for
    # the device, no profile evidence (each a property of the run, not of a candidate)
    warnings: list[str] = Field(default_factory=list)
    workload: list[CaseReport]
    device: str | None
    backend: str
    architecture: str
    aggregate_speedup: float | None
    winner_experiment_id: str
    stopping_reason: StoppingReason
    stopping_detail: str = ""  # one sentence a person can act on: what ran out or failed, and what to change
    commit: str
    output_dir: str
    # where verify and benchmark ran ("judge" or "candidate"), and why not the judge when `auto` asked for it
    verdict_process: str | None = None
    verdict_fallback: str = ""
    # what the run's workers cost: how many, and seconds per phase summed over all of them ("wall": their total)
    workers: int = 0
    worker_seconds: dict[str, float] = Field(default_factory=dict)
    # where the judges' verify went, by step (the candidate's CUDA start, its recorded calls, loading the
    # binaries, replays, references), summed over every case of every evaluation (docs/performance.md)
    verify_seconds: dict[str, float] = Field(default_factory=dict)
    # compiled kernel groups workers started with ("given", kept from earlier workers of the same source) and
    # that the run kept from them ("kept") (orchestrator/worker/kernel_cache.py)
    kernel_groups: dict[str, int] = Field(default_factory=dict)
    physics: str = ""  # the peaks the physics check used, or why there was none
    profile_evidence: list[str] = Field(default_factory=list)  # the profilers every candidate had to bring
    # calls in which the provider raised (each a failed proposal, its traceback under provider_failures/)
    provider_failures: int = 0
    # a kernel that autotunes itself: the choice per key its trusted step made, and first-call latencies
    autotune: AutotuneRecord | None = None
    # every finalist revalidated, in order, and why each that failed failed (more than one: a next-best was tried)
    finalists: list[FinalistAttempt] = Field(default_factory=list)


class RunResult(StrictModel):
    report: RunReport
    success: bool
    exit_code: ExitCode
    stopping_reason: StoppingReason
    stopping_detail: str = ""  # the same sentence as report.stopping_detail; empty in results of older versions
    winner_experiment_id: str
    best_kernel_path: str
    baseline: Evaluation | None
    final: Evaluation | None
    experiments: list[ExperimentRecord]
    commits: list[CommitRecord] = Field(default_factory=list)
    wall_seconds: float
    output_dir: str
    # what the provider said when it stopped, when it says more than stopping_detail: the tuner's
    # {"no_knob_found": {categories looked for, suggestions}} (orchestrator/providers/tune/explain.py)
    provider_explanation: dict[str, Any] | None = None
