"""What `tlx-agent optimize` prints on stdout: the run's outcome on a page, with the paths of its full record.

result.json keeps everything (every evaluation with its raw samples, statistics and profiles: over a thousand
lines for a small run); stdout carries what a person or an agent acts on first: the decision and why the run
stopped, each case's figures before and after, one line per experiment with its decision's reason (a candidate
turned down because a protected case got slower names the case there), and where the record lies. A failed
run prints the error document (protocol/errors.py) instead.
"""

from __future__ import annotations

from pydantic import Field

from protocol.base import StrictModel
from protocol.outcome import ExitCode, StoppingReason
from protocol.results import FinalistAttempt


class CaseFigures(StrictModel):
    """One case: the baseline and the final (revalidated) median in microseconds, the speedup between them."""

    case_id: str
    protected: bool
    weight: float
    baseline_median_us: float | None
    final_median_us: float | None
    speedup: float | None
    final_cv: float | None
    correct: bool | None
    percent_of_memory_peak: float | None = None  # where the harness states the case's work (bytes)
    percent_of_flop_peak: float | None = None  # where it states flops


class ExperimentLine(StrictModel):
    """One experiment's decision: `slower_cases` are the protected cases it slowed beyond their noise."""

    experiment_id: str
    decision: str  # promoted, rejected, failed, duplicate, revalidated, ...
    aggregate_speedup: float | None
    reason: str
    slower_cases: list[str] = []


class RunSummary(StrictModel):
    success: bool
    exit_code: ExitCode
    stopping_reason: StoppingReason
    stopping_detail: str
    winner_experiment_id: str
    aggregate_speedup: float | None  # the winner's revalidated weighted geometric mean over the baseline
    device: str | None
    commit: str
    warnings: list[str]
    cases: list[CaseFigures]
    experiments: list[ExperimentLine]
    # every finalist revalidated against fresh baseline runs, in order: more than one when the finalist failed and
    # a next-best earlier promotion was tried (each with why it failed or that it held)
    finalists: list[FinalistAttempt] = Field(default_factory=list)
    wall_seconds: float
    output_dir: str
    result_json: str  # everything: every evaluation, raw samples, statistics, profiles
    live_log: str
    best_kernel_path: str
