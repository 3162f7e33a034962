"""Live-log lines and the final result document (the report a reader needs first, the detail after)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.decision.copy_gap import copy_gaps
from orchestrator.decision.evidence import profiles_by_case
from orchestrator.decision.physics import device_peaks_line, evaluation_rates
from orchestrator.decision.profile_rules import ncu_duration_us, number, profile_value, tools_with_evidence
from orchestrator.ledger.live_log import quote
from protocol.bundle import Case, Target, runs_on_gpu
from protocol.devices import peaks_for
from protocol.results import (
    CandidateMetadata,
    CaseReport,
    CommitRecord,
    DecisionStatus,
    Evaluation,
    ExperimentRecord,
    FinalistAttempt,
    RunReport,
    RunResult,
    WorkerRecord,
)
from protocol.summary import CaseFigures, ExperimentLine, RunSummary

METADATA_FIELDS = ("hypothesis", "evidence", "change", "expected_effect", "risk")


def safe_name(case_id: str) -> str:
    """A directory-safe case id; long or rewritten ids get a short hash suffix to stay unique."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", case_id)
    if cleaned != case_id or len(cleaned) > 96:
        cleaned = f"{cleaned[:80]}-{hashlib.sha1(case_id.encode()).hexdigest()[:8]}"
    return cleaned


def proposal_line(experiment_id: str, metadata: CandidateMetadata) -> str:
    parts = [f"{experiment_id} status=proposed"]
    for name in METADATA_FIELDS:
        value = getattr(metadata, name)
        parts.append(f"{name}={quote(value) if value else quote('(not given)')}")
    return " ".join(parts)


def _has_figures(profile: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether Proton and the native profiler (NCU) gave figures, as `format_profile_for_log` decides it."""
    proton = profile.get("proton")
    return isinstance(proton, Mapping) and bool(proton.get("available", True)), ncu_duration_us(profile) is not None


def profile_tokens(profile: dict[str, Any] | None) -> str:
    """Proton attribution and the NCU summary as `,key=value` tokens (the same figures as the profile lines).

    A profile without any figure is the short `,profile=unavailable`: on a machine without profilers every
    case of every line would otherwise repeat the same list; the baseline's line says why, once
    (`profile_status`), and result.json keeps each case's diagnostics."""
    if not profile:
        return ""
    tokens = format_profile_for_log(profile, None).split() if any(_has_figures(profile)) else ["profile=unavailable"]
    if profile.get("error"):
        tokens.append(f"profile.error={quote(profile['error'], 120)}")
    return "," + ",".join(tokens)


def case_token(measurement, speedup: float | None = None) -> str:
    state = "correct" if measurement.correct else ("incorrect" if measurement.correct is False else "unverified")
    stats = measurement.stats
    token = f"case={measurement.case_id},{state}"
    if stats is not None:
        token += (f",median={stats.median:.3f}us,p95={stats.p95:.3f}us,cv={stats.cv:.4f},n={stats.n}")
    if speedup is not None:
        token += f",speedup={speedup:.4f}x"
    return token + profile_tokens(measurement.profile)


def profile_status(evaluation: Evaluation) -> str:
    """Which profilers gave no figures, on how many cases, and why (each distinct diagnostic once), as one
    `profiles_unavailable=` token; "" when every profiled case has both."""
    profiled = [m.profile for m in evaluation.cases if m.profile]
    missing: dict[str, int] = {}
    reasons: list[str] = []
    for profile in profiled:
        proton, native = _has_figures(profile)
        if proton and native:
            continue
        for tool, measured in (("proton", proton), ("native_profiler", native)):
            missing[tool] = missing.get(tool, 0) + (not measured)
        tools = [str(tool) for tool in profile.get("tools") or []]
        why = [str(text) for text in profile.get("diagnostics") or []]
        if not native and "ncu" not in tools:
            why.append(f"native_profiler: not among this target's profile tools ({', '.join(tools) or 'none'})")
        if profile.get("error"):
            why.append(f"profile() raised {profile['error']}")
        reasons += [text for text in why if text not in reasons]
    counts = ", ".join(f"{tool} on {count}/{len(profiled)} case(s)" for tool, count in missing.items() if count)
    if not counts:
        return ""
    return f"profiles_unavailable={quote(f'{counts}: ' + '; '.join(reasons), 600)}"


def verdict_line(verdict_process: str | None, fallback: str = "") -> str:
    """Where verify and benchmark run (docs/security.md): said once per run, after the baseline."""
    if verdict_process == "judge":
        return ("verdict process=judge reason='verify and benchmark run in the worker; each candidate runs in a "
                "forked process of its own, stopped outside its calls (on a GPU the worker replays the "
                "launches the candidate recorded)'")
    if fallback:
        return f"verdict process=candidate reason={quote(fallback, 700)}"
    return ("verdict process=candidate reason='the harness calls the candidate in its own process (a harness "
            "without JUDGE, or \"verdict_process\": \"candidate\" in target.json): a hostile candidate can reach "
            "the checks and the clock; for untrusted generators declare JUDGE in the harness (docs/harness.md)'")


def evaluation_line(experiment_id: str, role: str, evaluation: Evaluation) -> str:
    """One evaluation; the baseline's line (the first of a run) also says once which profilers are missing."""
    head = f"{experiment_id} {role} evaluation={evaluation.status.value}"
    if evaluation.reason:
        head += f" reason={quote(evaluation.reason)}"
    cases = " ".join(case_token(m) for m in evaluation.cases)
    status = profile_status(evaluation) if role == "baseline" else ""
    return " ".join(part for part in (head, cases, status) if part)


def decision_line(experiment_id: str, record: ExperimentRecord, status: str | None = None) -> str:
    decision = record.decision
    label = status or (decision.status.value if decision else "unknown")
    parts = [f"{experiment_id} status={label}"]
    if record.aggregate_speedup is not None:
        parts.append(f"aggregate_speedup={record.aggregate_speedup:.4f}x")
    candidate = next((e for e in record.evaluations if e.label in ("candidate", "final")), None)
    if candidate is not None:
        speedups = {row.case_id: row.speedup for row in record.comparisons}
        parts.extend(case_token(m, speedups.get(m.case_id)) for m in candidate.cases)
    if record.statistics:
        stats = record.statistics
        parts.append(f"test=lower_bound:{stats.get('lower_bound', 0):.4f}x,noise:{stats.get('noise_estimate', 0):.4f}")
    if decision is not None:
        parts.append(f"decision={quote(decision.reason)}")
    return " ".join(parts)


def _median(evaluation: Evaluation | None, case_id: str) -> tuple[float | None, float | None]:
    if evaluation is None:
        return None, None
    measured = evaluation.case(case_id)
    if measured is None or measured.stats is None:
        return None, None
    return measured.stats.median, measured.stats.cv


# ---- why the run stopped: one sentence each for result.json's stopping_detail ---------------------------

# What a failed revalidation gate means for the person reading the result, in the order orchestrator/decision/gates.py
# checks the gates (the first failed one gives the decision's reason)
_GATE_ADVICE = {
    "completed": "a run ended before it was verified and timed (the reason names why: a crash, a timeout, a limit "
                 "or the judge); experiments/final/ holds each of its workers' logs",
    "correct": "the finalist failed verification when run again: look for nondeterminism in it",
    "speedup": "its earlier gain did not reproduce against fresh baseline runs: measure again on a quieter machine",
    "case_regression": "a protected case is slower than the original beyond its noise: the reason names it; "
                       "raise --max-case-regression only if that loss is acceptable",
    "cv": "its timings were too noisy: run on a quieter machine or raise --max-cv",
    "noise": "its gain was not above the between-run noise: run on a quieter machine or raise --confirm-runs",
    "profile": "the native profile vetoed it: experiments/final/profile.json names the case that regressed",
}


def round_budget_detail(max_rounds: int, experiments: list[ExperimentRecord]) -> str:
    proposed = [e for e in experiments if e.experiment_id != "baseline" and not e.is_revalidation]
    promoted = sum(1 for e in proposed if e.decision and e.decision.status is DecisionStatus.PROMOTED)
    return (f"all {max_rounds} round(s) ran ({len(proposed)} candidate(s), {promoted} promoted); "
            "raise --max-rounds to try more candidates")


def time_budget_detail(expected_seconds: float, seconds_left: float, max_total_seconds: float) -> str:
    return (f"the next candidate needs about {expected_seconds:.0f} s of workers and {max(seconds_left, 0.0):.0f} s "
            f"were left before revalidation (--max-total-seconds {max_total_seconds:g}); raise --max-total-seconds "
            "to try more candidates")


def revalidation_detail(record: ExperimentRecord, later: str = "", no_further: str = "") -> str:
    """Which gate the finalist failed next to fresh baseline runs, its reason, and what that suggests; `later`:
    what the next-best finalists tried after it did (run/finalists.py), `no_further`: why none more was tried."""
    decision = record.decision
    reason = decision.reason if decision else "no decision"
    gates = decision.gates if decision else {}
    failed = sorted((gate for gate, passed in gates.items() if not passed),
                    key=lambda gate: list(_GATE_ADVICE).index(gate) if gate in _GATE_ADVICE else len(_GATE_ADVICE))
    where = f" at the {', '.join(failed)} gate{'s' if len(failed) > 1 else ''}" if failed else ""
    advice = f"; {_GATE_ADVICE[failed[0]]}" if failed and failed[0] in _GATE_ADVICE else ""
    after = "".join(f"; {text}" for text in (later, f"no further finalist was tried: {no_further}" if no_further
                                             else "") if text)
    return (f"the finalist {record.parent_id} failed revalidation next to fresh baseline runs{where} ({reason})"
            f"{after}, so the baseline stays{advice}")


def commit_failed_detail(record: ExperimentRecord, commits: list[CommitRecord]) -> str:
    failed = next((c for c in reversed(commits) if c.status == "failed"), None)
    why = failed.reason if failed and failed.reason else "no reason recorded"
    return (f"the checkpoint commit of the promoted {record.experiment_id} failed ({why}), so no further candidate "
            f"was tried; its source is {record.source_path}")


def rollback_failed_detail(revalidation: str, commits: list[CommitRecord]) -> str:
    failed = next((c for c in reversed(commits) if c.kind == "rollback" and c.status == "failed"), None)
    why = failed.reason if failed and failed.reason else "no reason recorded"
    return (f"the rollback commit failed ({why}) after {revalidation}; the checkpoint commits listed in result.json "
            "`commits` are still in the repository: revert them by hand")


def build_result(*, config, inputs, state_experiments: list[ExperimentRecord], baseline: Evaluation,
                 final: Evaluation | None, final_record: ExperimentRecord | None, winner_id: str,
                 stopping_reason: str, stopping_detail: str, exit_code: int, commits: list[CommitRecord],
                 provider_explanation: dict | None = None,
                 commit_summary: str, best_path: Path, wall_seconds: float, output_dir: Path,
                 provider_failures: int = 0, finalists: list[FinalistAttempt] | None = None) -> RunResult:
    speedups = {row.case_id: row for row in final_record.comparisons} if final_record else {}
    measured_rates = evaluation_rates(final or baseline, baseline.worker.device)
    rates = {rate.case_id: rate for rate in measured_rates}
    gaps = copy_gaps(final or baseline, baseline.worker.device, measured_rates)
    workload = []
    for case in inputs.cases:
        base_median, base_cv = _median(baseline, case.case_id)
        final_median, final_cv = _median(final, case.case_id) if final else (base_median, base_cv)
        row = speedups.get(case.case_id)
        measured = (final or baseline).case(case.case_id)
        mode = (baseline.case(case.case_id).metrics.get("benchmark.mode") if baseline.case(case.case_id) else None)
        rate = rates.get(case.case_id)
        workload.append(CaseReport(
            case_id=case.case_id, weight=case.weight, protected=case.protected, parameters=case.parameters,
            baseline_median_us=base_median, final_median_us=final_median,
            speedup=row.speedup if row else (1.0 if final is None and base_median else None),
            baseline_cv=base_cv, final_cv=final_cv, correct=measured.correct if measured else None,
            timing_mode=mode if isinstance(mode, str) else None,
            achieved_bytes_per_s=rate.bytes_per_s if rate else None,
            achieved_flop_per_s=rate.flop_per_s if rate else None,
            percent_of_memory_peak=rate.percent_of_memory_peak if rate else None,
            percent_of_flop_peak=rate.percent_of_flop_peak if rate else None,
            percent_of_copy_ceiling=rate.percent_of_copy_ceiling if rate else None,
            copy_gap=gaps.get(case.case_id)))
    aggregate = final_record.aggregate_speedup if final_record else 1.0
    required = tools_with_evidence(profiles_by_case(baseline)) if config.profile else []
    evaluations = [evaluation for record in state_experiments for evaluation in record.evaluations]
    workers = [evaluation.worker for evaluation in evaluations]
    report = RunReport(warnings=run_warnings(inputs.target, baseline, config.profile, required),
                       workload=workload, device=baseline.worker.device, backend=inputs.target.backend,
                       architecture=inputs.target.architecture, aggregate_speedup=aggregate,
                       winner_experiment_id=winner_id, stopping_reason=stopping_reason,
                       stopping_detail=stopping_detail, commit=commit_summary, output_dir=str(output_dir),
                       verdict_process=baseline.worker.verdict_process,
                       verdict_fallback=baseline.worker.verdict_fallback,
                       physics=device_peaks_line(baseline.worker.device), profile_evidence=required,
                       provider_failures=provider_failures, workers=len(workers),
                       worker_seconds=worker_cost(workers), verify_seconds=verify_cost(evaluations),
                       kernel_groups={"given": sum(worker.kernel_groups_given for worker in workers),
                                      "kept": sum(worker.kernel_groups_kept for worker in workers)},
                       finalists=list(finalists or []))
    return RunResult(report=report, success=exit_code == 0, exit_code=exit_code, stopping_reason=stopping_reason,
                     stopping_detail=stopping_detail, winner_experiment_id=winner_id, best_kernel_path=str(best_path), baseline=baseline,
                     final=final, experiments=state_experiments, commits=commits, wall_seconds=wall_seconds,
                     output_dir=str(output_dir), provider_explanation=provider_explanation)


def worker_cost(workers: list[WorkerRecord]) -> dict[str, float]:
    """Seconds per phase summed over the run's workers, and their whole wall time as `wall`."""
    totals: dict[str, float] = {"wall": sum(worker.wall_seconds for worker in workers)}
    for worker in workers:
        for phase, seconds in worker.phases.items():
            totals[phase] = totals.get(phase, 0.0) + seconds
    return {phase: round(seconds, 3) for phase, seconds in totals.items()}


def verify_cost(evaluations: list[Evaluation]) -> dict[str, float]:
    """The judges' verify steps (`verify.<step>_seconds` in each case's metrics) summed over the run's
    evaluations, by step: where the `verify` phase of `worker_cost` went."""
    totals: dict[str, float] = {}
    for evaluation in evaluations:
        for case in evaluation.cases:
            for key, value in case.metrics.items():
                if key.startswith("verify.") and key.endswith("_seconds") and isinstance(value, (int, float)) \
                        and not isinstance(value, bool):
                    step = key.removeprefix("verify.").removesuffix("_seconds")
                    totals[step] = totals.get(step, 0.0) + float(value)
    return {step: round(seconds, 3) for step, seconds in sorted(totals.items())}


def run_warnings(target: Target, baseline: Evaluation, profile: bool, required: list[str]) -> list[str]:
    """What weakens this run's verdicts, for the top of the report: where they were computed, whether physics
    and the profilers could check them."""
    warnings = []
    if baseline.worker.verdict_fallback:
        warnings.append(f"verdicts ran in the candidate's process: {baseline.worker.verdict_fallback}")
    elif baseline.worker.verdict_process == "candidate":
        asked = target.verdict_process == "candidate"
        warnings.append("verdicts ran in the candidate's process" + (
            ", as target.json asks: a dishonest candidate could reach the timer" if asked else
            ": the harness declares no JUDGE, so a dishonest candidate could reach the timer (docs/harness.md)"))
    if runs_on_gpu(target.backend) and peaks_for(baseline.worker.device) is None:
        warnings.append(device_peaks_line(baseline.worker.device))
    if profile and not required and runs_on_gpu(target.backend):
        warnings.append("no profiler measured the untouched kernel: candidates were promoted without profile "
                        "evidence (install Proton and ncu, tlx-agent doctor)")
    return warnings


# Profile lines are bottleneck-neutral: measured numbers and deltas, not a diagnosis.
PROTON_LOG_FIELDS = ("wrapper_us", "main_kernel_us", "non_main_kernel_us")
NCU_LOG_FIELDS = ("duration_us", "sm_throughput_pct", "dram_throughput_pct", "achieved_occupancy_pct",
                  "registers_per_thread", "local_load_bytes", "local_store_bytes")


def _fmt(value: float | None) -> str:
    return "null" if value is None else format(value, ".5g")


def format_profile_for_log(profile: Mapping[str, Any] | None, deltas: Mapping[str, Mapping[str, Any]] | None) -> str:
    """One compact `key=value` line: Proton attribution, NCU summary, then deltas against the incumbent.

    `native_profiler=unavailable` replaces the NCU figures when there is no NCU duration; likewise
    `proton=unavailable`. Deltas print as `delta.<key>=<abs>(<rel>%)`, null deltas are left out.
    """
    parts: list[str] = []
    if not isinstance(profile, Mapping) or not any(_has_figures(profile)):
        return "profile=unavailable"  # which profiler was missing and why is said once, on the baseline's line
    proton_block = profile.get("proton")
    if isinstance(proton_block, Mapping) and proton_block.get("available", True):
        parts += [f"proton.{field}={_fmt(profile_value(profile, 'proton', field))}" for field in PROTON_LOG_FIELDS]
    else:
        parts.append("proton=unavailable")
    if ncu_duration_us(profile) is None:
        parts.append("native_profiler=unavailable")
    else:
        parts += [f"ncu.{field}={_fmt(profile_value(profile, 'ncu', field))}" for field in NCU_LOG_FIELDS]
    for key, entry in (deltas or {}).items():
        absolute = number(entry.get("delta")) if isinstance(entry, Mapping) else None
        if absolute is None:
            continue
        relative = number(entry.get("relative"))
        suffix = "" if relative is None else f"({relative * 100:+.2f}%)"
        parts.append(f"delta.{key}={absolute:+.5g}{suffix}")
    return " ".join(parts)


def slower_cases(record: ExperimentRecord, cases: list[Case], max_case_regression: float) -> list[str]:
    """The protected cases an experiment's decision found slower beyond their noise (its case_regression gate),
    or, triaged on its first run, beyond the triage's margin."""
    if record.decision is None or record.decision.gates.get("case_regression") is not False:
        return []
    protected = {case.case_id for case in cases if case.protected}
    triaged = record.statistics.get("triage")
    if isinstance(triaged, dict):
        return [case_id for case_id in triaged.get("slower_cases") or [] if case_id in protected]
    per_case = record.statistics.get("per_case") or {}
    return [case_id for case_id, bounds in per_case.items() if case_id in protected and isinstance(bounds, dict)
            and isinstance(bounds.get("upper"), (int, float)) and bounds["upper"] < 1.0 - max_case_regression]


def run_summary(result: RunResult, cases: list[Case], max_case_regression: float) -> RunSummary:
    """stdout of optimize: the outcome, each case's figures, one line per experiment, the record's paths."""
    report = result.report
    output_dir = Path(result.output_dir)
    return RunSummary(
        success=result.success, exit_code=result.exit_code, stopping_reason=result.stopping_reason,
        stopping_detail=result.stopping_detail, winner_experiment_id=result.winner_experiment_id,
        aggregate_speedup=report.aggregate_speedup, device=report.device, commit=report.commit,
        warnings=report.warnings,
        cases=[CaseFigures(case_id=case.case_id, protected=case.protected, weight=case.weight,
                           baseline_median_us=case.baseline_median_us, final_median_us=case.final_median_us,
                           speedup=case.speedup, final_cv=case.final_cv, correct=case.correct,
                           percent_of_memory_peak=case.percent_of_memory_peak,
                           percent_of_flop_peak=case.percent_of_flop_peak) for case in report.workload],
        experiments=[ExperimentLine(experiment_id=record.experiment_id,
                                    decision=record.decision.status.value if record.decision else "undecided",
                                    aggregate_speedup=record.aggregate_speedup,
                                    reason=record.decision.reason if record.decision else "",
                                    slower_cases=slower_cases(record, cases, max_case_regression))
                     for record in result.experiments if record.experiment_id != "baseline"],
        finalists=list(report.finalists),
        wall_seconds=result.wall_seconds, output_dir=result.output_dir,
        result_json=str(output_dir / "result.json"), live_log=str(output_dir / "live.log"),
        best_kernel_path=result.best_kernel_path)
