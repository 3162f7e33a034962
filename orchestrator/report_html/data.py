"""Pure shaping of a run's records into the rows and series the HTML report draws: no I/O, no HTML.

Every figure is taken from what the run persisted (comparisons, statistics, metrics, profiles); nothing is
re-measured or recomputed from raw samples except rates (work / latency). A missing figure stays None.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from orchestrator.decision.profile_rules import DELTA_FIELDS, number, profile_value
from orchestrator.report_html.ceilings import DeviceCeilings
from protocol.batch import BatchSummary
from protocol.completion import CaseOutcome
from protocol.results import DecisionStatus, Evaluation, ExperimentRecord

# Kernel-time figures of a profile, in microseconds: the profile deltas the page shows. Proton's wrapper_us is
# host time around the launches, and the other figures are throughputs and counts the decision log prints.
KERNEL_TIME_FIELDS: tuple[tuple[str, str, str], ...] = tuple(
    field for field in DELTA_FIELDS if field[0] in ("ncu.duration_us", "proton.main_kernel_us")
)
WORK_KEYS = ("bytes", "flops")  # what harness_kit's entry_point puts into a case's metrics (examples' _work)
DEFAULT_MAX_CASE_REGRESSION = 0.02  # protocol.bundle.Budget's, for run.json files written before the gate
# "NAME old -> new", the tuner's change line (orchestrator/providers/tune/metadata.py), once per knob moved.
_KNOB_MOVE = re.compile(r"\b([A-Za-z_]\w*) (\S+) -> (\S+)")


class CaseSpeedup(BaseModel):
    case_id: str
    incumbent_us: float | None
    candidate_us: float | None
    speedup: float | None
    lower: float | None  # the per-case confidence interval of the run's statistics, when recorded
    upper: float | None
    correct: bool | None
    # a protected case slower than the incumbent beyond its noise by more than the allowance (upper bound below
    # 1 - max_case_regression): what the case_regression gate rejects
    slower: bool = False


class CandidateSpeedups(BaseModel):
    """One experiment after the baseline: its per-case speedups over the incumbent it was measured against."""

    experiment_id: str
    status: str
    reason: str
    aggregate_speedup: float | None
    lower_bound: float | None
    noise: float | None  # relative between-run noise (0.003 = 0.3 %): speedups within 1 ± noise are noise
    cases: list[CaseSpeedup]


class SearchStep(BaseModel):
    experiment_id: str
    round_index: int
    parent_id: str | None
    status: str
    promoted: bool
    reason: str
    hypothesis: str
    change: str
    knob_moves: list[str]  # "BLOCK_M 64 -> 128" per knob the change line names; empty when it names none
    expected_effect: str
    risk: str


class CaseLatency(BaseModel):
    """Baseline against final latency of one case, with the rates its work figures give and their share of the
    device's ceilings."""

    case_id: str
    parameters: str
    baseline_us: float | None
    final_us: float | None
    speedup: float | None
    bytes: float | None
    flops: float | None
    flop_dtype: str | None  # the precision the harness says the flops are in; the FLOP peak is that dtype's
    baseline_bytes_per_s: float | None
    final_bytes_per_s: float | None
    final_flop_per_s: float | None
    baseline_flop_per_s: float | None
    final_memory_peak_fraction: float | None  # of the device's datasheet memory bandwidth
    final_copy_fraction: float | None  # of the copy ceiling measured in the run
    final_flop_peak_fraction: float | None  # of the datasheet FLOP/s for `flop_dtype`
    slower: bool = False  # the final runs slower than the baseline on this protected case
    copy_gap: str | None = None  # a memory-bound case below 85 % of the copy ceiling: what stops it (result.json)


class ProgressPoint(BaseModel):
    """One decided experiment on the wall clock: its speedup over the baseline and the best so far."""

    experiment_id: str
    seconds: float  # since the run started (journal.jsonl), else the sum of the experiments' wall seconds
    status: str
    over_baseline: float | None  # the best so far times this experiment's speedup over its incumbent
    best_so_far: float  # over the baseline, a product of the promoted candidates' speedups (final: revalidated)
    slower_case: bool  # rejected for slowing a protected case


class ProfileDeltaRow(BaseModel):
    case_id: str
    metric: str  # "proton.main_kernel_us", "ncu.duration_us", ...
    baseline: float
    final: float
    delta: float  # final - baseline
    relative: float | None  # delta / baseline (None when the baseline is 0)


class BatchRow(BaseModel):
    job_id: str
    kernel: str
    status: str
    exit_code: int | None
    speedup: float | None
    gpu: str | None
    wall_seconds: float | None
    report_link: str | None  # relative to the batch page; None when the job's output dir has no report.html
    error: str | None


def _status(record: ExperimentRecord) -> str:
    return record.decision.status.value if record.decision else "undecided"


def promotion_threshold(budget: Mapping[str, Any], experiments: Sequence[ExperimentRecord]) -> float | None:
    """min_speedup from run.json's budget; else the one the statistics recorded (older run.json)."""
    recorded = number(budget.get("min_speedup"))
    if recorded is not None:
        return recorded
    return next(
        (
            value
            for record in experiments
            if (value := number(record.statistics.get("min_speedup"))) is not None
        ),
        None,
    )


def max_case_regression(budget: Mapping[str, Any]) -> float:
    """run.json's allowance; the default for a run.json written before the per-case gate."""
    recorded = number(budget.get("max_case_regression"))
    return recorded if recorded is not None else DEFAULT_MAX_CASE_REGRESSION


def candidate_speedups(experiments: Sequence[ExperimentRecord], protected: Sequence[str] | None = None,
                       allowance: float = DEFAULT_MAX_CASE_REGRESSION) -> list[CandidateSpeedups]:
    """Every experiment but the baseline, in record order, with per-case speedups and the noise band. A protected
    case (every case when `protected` is None) whose upper bound lies below 1 - `allowance` is `slower`."""
    rows: list[CandidateSpeedups] = []
    for record in experiments:
        if record.decision is not None and record.decision.status == DecisionStatus.BASELINE:
            continue
        per_case = record.statistics.get("per_case")
        per_case = per_case if isinstance(per_case, Mapping) else {}
        cases = []
        for comparison in record.comparisons:
            interval = per_case.get(comparison.case_id)
            interval = interval if isinstance(interval, Mapping) else {}
            upper = number(interval.get("upper"))
            cases.append(
                CaseSpeedup(
                    case_id=comparison.case_id,
                    incumbent_us=comparison.incumbent_median_us,
                    candidate_us=comparison.candidate_median_us,
                    speedup=comparison.speedup,
                    lower=number(interval.get("lower")),
                    upper=upper,
                    correct=comparison.correct,
                    slower=upper is not None and upper < 1.0 - allowance
                    and (protected is None or comparison.case_id in protected),
                )
            )
        rows.append(
            CandidateSpeedups(
                experiment_id=record.experiment_id,
                status=_status(record),
                reason=record.decision.reason if record.decision else "",
                aggregate_speedup=record.aggregate_speedup,
                lower_bound=number(record.statistics.get("lower_bound")),
                noise=number(record.statistics.get("noise_estimate")),
                cases=cases,
            )
        )
    return rows


def knob_moves(change: str) -> list[str]:
    """The knobs a change line says it moved, as "NAME old -> new"; text after `;` or `(` is commentary."""
    head = re.split(r";| \(", change, maxsplit=1)[0]
    return [f"{name} {old} -> {new}" for name, old, new in _KNOB_MOVE.findall(head)]


def search_path(experiments: Sequence[ExperimentRecord]) -> list[SearchStep]:
    return [
        SearchStep(
            experiment_id=record.experiment_id,
            round_index=record.round_index,
            parent_id=record.parent_id,
            status=_status(record),
            promoted=_status(record) in (DecisionStatus.PROMOTED.value, DecisionStatus.REVALIDATED.value),
            reason=record.decision.reason if record.decision else "",
            hypothesis=record.metadata.hypothesis,
            change=record.metadata.change,
            knob_moves=knob_moves(record.metadata.change),
            expected_effect=record.metadata.expected_effect,
            risk=record.metadata.risk,
        )
        for record in experiments
    ]


def work_figures(evaluations: Sequence[Evaluation | None]) -> dict[str, dict[str, Any]]:
    """Case id -> {"bytes", "flops", "flop_dtype"} from the first evaluation whose metrics carry them (the work of
    a case does not depend on the kernel, so the baseline's figures hold for the final too)."""
    figures: dict[str, dict[str, Any]] = {}
    for evaluation in evaluations:
        for case in evaluation.cases if evaluation else []:
            # the worker files a benchmark's metrics under "benchmark." (protocol: one namespace per phase)
            found: dict[str, Any] = {key: value for key in WORK_KEYS if (value := number(
                case.metrics.get(f"benchmark.{key}", case.metrics.get(key)))) is not None}
            dtype = case.metrics.get("benchmark.flop_dtype", case.metrics.get("flop_dtype"))
            if found and isinstance(dtype, str):
                found["flop_dtype"] = dtype
            if found and case.case_id not in figures:
                figures[case.case_id] = found
    return figures


def _rate(amount: float | None, microseconds: float | None) -> float | None:
    if amount is None or microseconds is None or microseconds <= 0:
        return None
    return amount / (microseconds * 1e-6)


def _fraction(rate: float | None, ceiling: float | None) -> float | None:
    return rate / ceiling if rate is not None and ceiling else None


def _parameters(parameters: Mapping[str, Any]) -> str:
    return " ".join(
        f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in parameters.items()
    )


def case_latencies(
    workload: Sequence[CaseOutcome], work: Mapping[str, Mapping[str, Any]], ceilings: DeviceCeilings | None,
    allowance: float = DEFAULT_MAX_CASE_REGRESSION,
) -> list[CaseLatency]:
    """Per case: latencies, rates and their share of the ceilings; `slower` where the final is slower than the
    baseline by more than `allowance` on a protected case."""
    rows: list[CaseLatency] = []
    for case in workload:
        figures = work.get(case.case_id, {})
        amount_bytes, amount_flops = number(figures.get("bytes")), number(figures.get("flops"))
        dtype = figures.get("flop_dtype") if isinstance(figures.get("flop_dtype"), str) else None
        final_bandwidth = _rate(amount_bytes, case.final_median_us)
        final_flops = _rate(amount_flops, case.final_median_us)
        rows.append(
            CaseLatency(
                case_id=case.case_id,
                parameters=_parameters(case.parameters),
                baseline_us=case.baseline_median_us,
                final_us=case.final_median_us,
                speedup=case.speedup,
                bytes=amount_bytes,
                flops=amount_flops,
                flop_dtype=dtype,
                baseline_bytes_per_s=_rate(amount_bytes, case.baseline_median_us),
                final_bytes_per_s=final_bandwidth,
                baseline_flop_per_s=_rate(amount_flops, case.baseline_median_us),
                final_flop_per_s=final_flops,
                final_memory_peak_fraction=_fraction(final_bandwidth,
                                                     ceilings.memory_bytes_per_s if ceilings else None),
                final_copy_fraction=_fraction(final_bandwidth, ceilings.copy_bytes_per_s if ceilings else None),
                # without the flops' dtype no peak is the right one (fp32 adds against an fp8 peak read as ~0 %)
                final_flop_peak_fraction=_fraction(final_flops, ceilings.flop_per_s(dtype) if ceilings and dtype
                                                   else None),
                slower=case.protected and case.speedup is not None and case.speedup < 1.0 - allowance,
                copy_gap=case.copy_gap,
            )
        )
    return rows


def progress(experiments: Sequence[ExperimentRecord], seconds: Mapping[str, float]) -> list[ProgressPoint]:
    """Each decided experiment at the time its decision was taken (`seconds`, from the journal; without one,
    the running sum of the records' wall seconds), with the best speedup over the baseline so far."""
    points: list[ProgressPoint] = []
    best, clock = 1.0, 0.0
    for record in experiments:
        clock += record.wall_seconds
        if record.decision is None or record.experiment_id == "baseline":
            continue
        at = seconds.get(record.experiment_id, clock)
        status = _status(record)
        aggregate = record.aggregate_speedup
        if record.is_revalidation:
            over = aggregate  # measured against fresh baseline runs
            if status == DecisionStatus.REVALIDATED.value and aggregate:
                best = aggregate
        else:
            over = best * aggregate if aggregate else None
            if status == DecisionStatus.PROMOTED.value and aggregate:
                best = over or best
        points.append(ProgressPoint(experiment_id=record.experiment_id, seconds=at, status=status,
                                    over_baseline=over, best_so_far=best,
                                    slower_case=record.decision.gates.get("case_regression") is False))
    return points


def profile_deltas(
    baseline: Mapping[str, Any] | None, best: Mapping[str, Any] | None
) -> list[ProfileDeltaRow]:
    """The kernel-time figures both the baseline's and the finalist's profile of a case have, case by case."""
    rows: list[ProfileDeltaRow] = []
    for case_id in [case for case in (baseline or {}) if case in (best or {})]:
        for key, section, field in KERNEL_TIME_FIELDS:
            before = profile_value(baseline[case_id], section, field)
            after = profile_value(best[case_id], section, field)
            if before is None or after is None:
                continue
            rows.append(
                ProfileDeltaRow(
                    case_id=case_id,
                    metric=key,
                    baseline=before,
                    final=after,
                    delta=after - before,
                    relative=(after - before) / before if before else None,
                )
            )
    return rows


def batch_rows(summary: BatchSummary, report_links: Mapping[str, str]) -> list[BatchRow]:
    """One row per job in the summary's order; `report_links` maps job id -> the job's report, relative."""
    return [
        BatchRow(
            job_id=job.job_id,
            kernel=job.kernel,
            status=job.status.value,
            exit_code=job.exit_code,
            speedup=job.speedup,
            gpu=job.gpu,
            wall_seconds=job.wall_seconds,
            report_link=report_links.get(job.job_id),
            error=job.error,
        )
        for job in summary.jobs
    ]
