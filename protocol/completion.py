"""The completion report: what an agent quotes to the user when a `tlx-agent optimize` run is over.

`tlx-agent report OUT` (`orchestrator/cli/report.py`) builds it from the run's output directory: result.json
(the workload, latencies, speedup, CV, correctness, stopping reason, commit) and run.json (the inputs and the
device). A run that ended in an error document has no result.json; its report says `finished: false` and
carries the error, with whatever run.json and the frozen bundle still tell.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from protocol.base import StrictModel
from protocol.manifest import InputPaths
from protocol.outcome import ExitCode, StoppingReason
from protocol.results import CommitRecord, FinalistAttempt


class CaseOutcome(StrictModel):
    """One case of the workload: the baseline and the final (revalidated) measurement, in microseconds."""

    case_id: str
    parameters: dict[str, Any]
    weight: float
    protected: bool
    baseline_median_us: float | None
    final_median_us: float | None
    speedup: float | None  # baseline median / final median
    baseline_cv: float | None
    final_cv: float | None
    correct: bool | None  # in the final measurement (the baseline's when nothing was promoted)
    # as result.json's report states them (protocol/results.py CaseReport); None in results of older versions
    timing_mode: str | None = None
    achieved_bytes_per_s: float | None = None
    achieved_flop_per_s: float | None = None
    percent_of_memory_peak: float | None = None
    percent_of_flop_peak: float | None = None
    percent_of_copy_ceiling: float | None = None
    copy_gap: str | None = None  # a memory-bound case below 85 % of the copy ceiling: the limit that stops it


class CompletionReport(StrictModel):
    finished: bool  # the run wrote result.json: it reached its final revalidation or a decided end
    # what weakens the run's verdicts (result.json report.warnings): verdicts in the candidate's process, no
    # physics check for the device, no profile evidence; said first
    warnings: list[str] = Field(default_factory=list)
    exit_code: ExitCode | None  # null: unknown (no result.json and no recorded error)
    success: bool  # exit code 0: a winner was promoted and survived revalidation
    output_dir: str | None  # absolute; null only when the run failed before creating it
    error: str | None  # why an unfinished run stopped; null for a finished one
    kernel: str | None  # the --kernel file, absolute (from run.json)
    inputs: InputPaths | None  # every input file of the run (null: no run.json)
    workload: list[CaseOutcome]
    device: str | None  # what the baseline's worker saw: a GPU name, or "cpu"
    backend: str | None
    architecture: str | None
    aggregate_speedup: float | None  # weighted geometric mean over the cases
    worst_final_cv: float | None  # the largest final CV over the cases
    max_cv: float | None  # the run's CV budget (run.json budget.max_cv)
    all_protected_correct: bool | None  # null: some protected case has no verdict
    stopping_reason: StoppingReason | None
    stopping_detail: str = ""  # the run's one sentence on why it stopped (result.json stopping_detail)
    winner_experiment_id: str | None
    best_kernel_path: str | None
    commit: str | None  # the run's commit summary ("committed <rev> (git)", "disabled (--no-commit-winner)", ...)
    commits: list[CommitRecord]
    # the finalists revalidated, in order, each with its outcome (result.json report.finalists): more than one
    # when the finalist failed its revalidation and the next-best earlier promotion was tried
    finalists: list[FinalistAttempt] = Field(default_factory=list)
    wall_seconds: float | None
    sources: list[str]  # the files this report was read from, absolute
