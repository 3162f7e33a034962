"""The preflight's verdicts: pure functions from evaluations (and the device seen) to `CheckResult`s.

Nothing here starts a worker or touches a file; `orchestrator/preflight/runner.py` runs the workers and
`orchestrator/preflight/lock_report.py` writes what these return into the lock.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from orchestrator.autotune.lines import config_text
from orchestrator.bundle import arch as arch_mod
from orchestrator.decision.physics import evaluation_rates, physics_verdict
from protocol.autotune import AutotuneRecord
from protocol.bundle import Case, Target
from protocol.lock import CaseStability, CheckResult
from protocol.results import Evaluation, EvaluationStatus


def passed_check(name: str, message: str, **details: Any) -> CheckResult:
    return CheckResult(name=name, status="passed", message=message, details=details)


def failed_check(name: str, message: str, **details: Any) -> CheckResult:
    return CheckResult(name=name, status="failed", message=message, details=details)


def skipped_check(name: str, message: str, **details: Any) -> CheckResult:
    return CheckResult(name=name, status="skipped", message=message, details=details)


def check_device(target: Target, view: arch_mod.DeviceView, arch: arch_mod.ArchSpec | None) -> CheckResult:
    problems = [p for p in (arch_mod.target_mismatch(target, view),
                            arch_mod.arch_mismatch(arch, view) if arch else None) if p]
    details = {"device": view.to_json(), "arch": arch.name if arch else None}
    if problems:
        return failed_check("device", "; ".join(problems), **details)
    said = f"--arch {arch.name} matches: " if arch else ""
    return passed_check("device", said + view.describe(), **details)


def _worker_detail(evaluation: Evaluation) -> str:
    return f"{evaluation.status.value}: {evaluation.reason or 'no reason given'} (worker log: {evaluation.worker.log_path})"


def check_build(evaluation: Evaluation) -> CheckResult:
    if evaluation.status is EvaluationStatus.BUILD_FAILED or (evaluation.status is not EvaluationStatus.OK
                                                              and not evaluation.cases):
        return failed_check("build", f"the untouched kernel does not build: {_worker_detail(evaluation)}")
    return passed_check("build", "the untouched kernel builds")


def check_verify(evaluation: Evaluation, cases: Sequence[Case], autotune: AutotuneRecord | None = None) -> CheckResult:
    """Every protected case correct on the untouched kernel. A kernel that autotunes itself ran each case at its
    own autotune's choice, which Triton times and never checks: a failing case names that configuration."""
    if not evaluation.cases:
        return skipped_check("verify", "not reached: the untouched kernel did not build")
    by_id = {m.case_id: m for m in evaluation.cases}
    failed_protected = [c.case_id for c in cases if c.protected and by_id.get(c.case_id) and
                        by_id[c.case_id].correct is False]
    failed_other = [c.case_id for c in cases if not c.protected and by_id.get(c.case_id) and
                    by_id[c.case_id].correct is False]
    unverified = [c.case_id for c in cases if by_id.get(c.case_id) is None or by_id[c.case_id].correct is None]
    details = {"diagnostics": {m.case_id: m.diagnostics for m in evaluation.cases if m.diagnostics},
               "failed_unprotected": failed_other}
    if failed_protected:
        first = by_id[failed_protected[0]]
        return failed_check("verify", f"protected case(s) {', '.join(failed_protected)} fail on the untouched "
                                      f"kernel (first: {first.diagnostics or 'verify returned false'})"
                                      f"{chosen_for(autotune, failed_protected[0])}", **details)
    if unverified:
        return failed_check("verify", f"case(s) {', '.join(unverified)} were not verified: "
                                      f"{_worker_detail(evaluation)}", **details)
    note = f"; unprotected case(s) {', '.join(failed_other)} fail (diagnostic only)" if failed_other else ""
    return passed_check("verify", f"{len(cases)} case(s) verified, every protected case passes{note}", **details)


def chosen_for(autotune: AutotuneRecord | None, case_id: str) -> str:
    """`; at its own autotune's choice for this case: ...`, or "" when no choice covers the case."""
    choices = [c for c in (autotune.choices if autotune else []) if case_id in c.case_ids]
    if not choices:
        return ""
    said = "; ".join(f"{c.kernel} {config_text(c.config)}" for c in choices)
    return (f"; the case ran at the kernel's own autotune choice for its key ({said}), which Triton's autotune "
            "timed but never checked: another configuration of the list may be correct there")


def check_stability(evaluations: Sequence[Evaluation], cases: Sequence[Case], max_cv: float,
                    not_judged: str | None = None) -> tuple[CheckResult, list[CaseStability]]:
    """Within-worker CV (the promotion gate) and between-worker median spread, per case, against max_cv.

    With `not_judged` (why the figures cannot judge this bundle) the check reports them and is skipped."""
    broken = [(index, e) for index, e in enumerate(evaluations, start=1) if e.status is not EvaluationStatus.OK]
    rows: list[CaseStability] = []
    problems: list[str] = []
    for case in cases:
        measured = [m for e in evaluations if e.status is EvaluationStatus.OK
                    and (m := e.case(case.case_id)) is not None and m.stats is not None]
        medians = [m.stats.median for m in measured]  # type: ignore[union-attr]
        cvs = [m.stats.cv for m in measured]  # type: ignore[union-attr]
        center = statistics.median(medians) if medians else None
        spread = (max(medians) - min(medians)) / center if medians and center else None
        worst = max(cvs) if cvs else None
        stable = (len(measured) == len(evaluations) and worst is not None and worst <= max_cv
                  and spread is not None and spread <= max_cv)
        rows.append(CaseStability(case_id=case.case_id, protected=case.protected, medians_us=medians, cvs=cvs,
                                  samples=[m.stats.n for m in measured], median_us=center,  # type: ignore[union-attr]
                                  median_spread=spread, max_cv=worst, stable=stable))
        if worst is not None and worst > max_cv:
            problems.append(f"case {case.case_id}: worst within-worker CV {worst:.4f} > --max-cv {max_cv:.4f} "
                            f"(per worker {', '.join(f'{c:.4f}' for c in cvs)})")
        if spread is not None and spread > max_cv:
            problems.append(f"case {case.case_id}: per-worker medians spread {spread:.2%} > --max-cv {max_cv:.4f} "
                            f"(medians {', '.join(f'{m:.3f}' for m in medians)} us)")
    for index, evaluation in broken:
        problems.insert(0, f"benchmark worker {index} failed: {_worker_detail(evaluation)}")
    details = {"workers": len(evaluations), "max_cv": max_cv}
    if not_judged is not None and not broken:
        figures = "; ".join(problems) or "every case within --max-cv"
        return skipped_check("benchmark_stability", f"not judged: {not_judged} (measured: {figures})",
                             **details), rows
    if problems:
        return failed_check("benchmark_stability", "; ".join(problems), **details), rows
    summary = ", ".join(f"{r.case_id} median {r.median_us:.3f} us spread {r.median_spread:.2%} worst cv "
                        f"{r.max_cv:.4f}" for r in rows if r.median_us is not None and r.median_spread is not None
                        and r.max_cv is not None)
    return passed_check("benchmark_stability", f"{len(evaluations)} fresh workers within --max-cv {max_cv:.4f}: "
                                               f"{summary}", **details), rows


def _kernel_names(proton: dict[str, Any]) -> list[tuple[str, float]]:
    kernels = proton.get("kernels") or []
    return [(str(k.get("name")), float(k.get("time_us") or 0.0)) for k in kernels if isinstance(k, dict)]


def profile_case_verdict(profile: dict[str, Any], main_scope: str | None) -> tuple[str, str]:
    """("passed" | "failed" | "skipped", why) for one case's profile reply."""
    if profile.get("error"):
        return "failed", f"profile() raised {profile['error']}"
    if profile.get("spilled"):
        return "skipped", f"profile reply was spilled to {profile.get('artifact')}; not inspected"
    proton = profile.get("proton")
    if not isinstance(proton, dict):
        diagnostics = profile.get("diagnostics") or []
        return "skipped", (diagnostics[0] if diagnostics else "the profile reply has no proton section")
    if not proton.get("available"):
        diagnostics = proton.get("diagnostics") or ["Proton attribution unavailable"]
        return "skipped", str(diagnostics[0])
    kernels = _kernel_names(proton)
    names = [name for name, _ in kernels]
    if main_scope:
        if main_scope not in names:
            return "failed", f"main_scope {main_scope!r} matched no kernel launch; kernels seen: {names[:10]}"
        main_us = proton.get("main_kernel_us")
        if not isinstance(main_us, (int, float)) or main_us <= 0:
            return "failed", f"main kernel {main_scope!r} launched but main_kernel_us is {main_us!r}, not > 0"
        heaviest = max(kernels, key=lambda item: item[1])
        note = (f"; note: {heaviest[0]!r} takes more GPU time ({heaviest[1]:.3f} us) than the main scope"
                if heaviest[0] != main_scope else "")
        return "passed", f"main launch {main_scope!r} ({main_us:.3f} us per call){note}"
    if len(names) == 1:
        return "passed", (f"the only Triton kernel is {names[0]!r}; set target.json main_scope to pin it")
    if not names:
        return "failed", "Proton saw no kernel launch: the case does not run the kernel"
    return "failed", (f"{len(names)} kernels launched ({', '.join(names[:5])}) and target.json sets no main_scope; "
                      "name the main kernel there")


def check_verdict_process(target: Target, evaluation: Evaluation | None, fallback: str) -> CheckResult:
    """Where verdicts are computed, said before any run: in the judge, or (failed) in the candidate's process
    without the target asking for that by name. `evaluation` is the judged worker's unless the fallback was taken:
    a kernel that fails in the candidate's process too fails on its own, and its verdicts would run in the judge."""
    name = "verdict_process"
    if target.verdict_process == "candidate":
        return passed_check(name, "verdicts run in the candidate's process, as target.json asks "
                                  "(\"verdict_process\": \"candidate\"): a dishonest candidate can reach the timer there",
                            judged=False)
    if fallback:
        return failed_check(name, f"{fallback}. Until then a run of this bundle measures where a candidate can cheat",
                            judged=False)
    where = evaluation.worker.verdict_process if evaluation is not None else None
    if where == "candidate":
        return failed_check(name, "the harness declares no JUDGE, so verify and benchmark run in the candidate's "
                                  "process, where a dishonest candidate can reach the timer: declare JUDGE "
                                  "(docs/harness.md) or set \"verdict_process\": \"candidate\" in target.json to "
                                  "choose this knowingly", judged=False)
    if where == "judge":
        return passed_check(name, "verdicts run in the judge, out of the candidate's reach", judged=True)
    return skipped_check(name, "not known: the untouched kernel's worker did not start")


WORK_FIGURES_MISSING = ("the harness reports no work figures (bytes, flops) with its benchmark: no measurement can be "
                        "checked against what the device can do, and the report has no percent of peak; give JUDGE "
                        "a work= function (docs/harness.md) or return them in benchmark()'s metrics")


def check_work_figures(evaluation: Evaluation | None) -> CheckResult:
    """The harness's work figures against the device's peaks: present (else a warning), and possible."""
    name = "work_figures"
    measured = [m for m in (evaluation.cases if evaluation else []) if m.stats is not None]
    if not measured:
        return skipped_check(name, "not checked: the untouched kernel was not benchmarked")
    rates = evaluation_rates(evaluation)  # type: ignore[arg-type]
    if not any(rate.bytes or rate.flops for rate in rates):
        return skipped_check(name, f"warning: {WORK_FIGURES_MISSING}", warning=True)
    impossible = physics_verdict(evaluation, untouched=True)  # type: ignore[arg-type]
    if impossible is not None:
        return failed_check(name, impossible)
    shown = [f"{rate.case_id}: " + ", ".join(part for part in (
        f"{rate.bytes_per_s / 1e9:.1f} GB/s" if rate.bytes_per_s else "",
        f"{rate.percent_of_memory_peak:.0f}% of the memory peak" if rate.percent_of_memory_peak is not None else "",
        f"{rate.flop_per_s / 1e12:.2f} TFLOP/s" if rate.flop_per_s else "") if part) for rate in rates]
    return passed_check(name, "; ".join(shown), rates=[rate.to_json() for rate in rates])


def check_profile(evaluation: Evaluation | None, target: Target, harness_functions: Sequence[str],
                  enabled: bool) -> CheckResult:
    if not enabled:
        return skipped_check("profile", "profiling disabled (--no-profile)")
    if "profile" not in harness_functions:
        return skipped_check("profile", "the harness defines no profile(); the main launch cannot be checked")
    profiled = [(m.case_id, m.profile) for m in (evaluation.cases if evaluation else []) if m.profile]
    if not profiled:
        return skipped_check("profile", "no case was profiled (the untouched kernel did not get that far)")
    verdicts = {case_id: profile_case_verdict(profile, target.main_scope) for case_id, profile in profiled}
    ncu_notes = {case_id: (profile.get("ncu") or {}).get("diagnostics", [])[:1] for case_id, profile in profiled
                 if isinstance(profile.get("ncu"), dict) and not profile["ncu"].get("available", True)}
    details = {"cases": {cid: {"status": s, "message": m} for cid, (s, m) in verdicts.items()},
               "ncu_unavailable": ncu_notes, "main_scope": target.main_scope}
    failed = {cid: m for cid, (s, m) in verdicts.items() if s == "failed"}
    if failed:
        return failed_check("profile", "; ".join(f"case {cid}: {m}" for cid, m in failed.items()), **details)
    passed = {cid: m for cid, (s, m) in verdicts.items() if s == "passed"}
    if passed:
        first_id, first = next(iter(passed.items()))
        return passed_check("profile", f"{len(passed)}/{len(verdicts)} case(s) attribute the main launch "
                                       f"(case {first_id}: {first})", **details)
    reason = next(iter(verdicts.values()))[1]
    return skipped_check("profile", f"no profiler available here, main launch not checked: {reason}", **details)


def check_invalid_rejected(evaluation: Evaluation | None, problem: str | None = None) -> CheckResult:
    name = "negative_invalid_source"
    if evaluation is None:
        return failed_check(name, problem or "the invalid variant was not evaluated")
    if evaluation.status is EvaluationStatus.BUILD_FAILED:
        return passed_check(name, f"build rejects a kernel with a syntax error ({evaluation.reason})")
    if evaluation.status is EvaluationStatus.OK:
        return failed_check(name, "build accepted a kernel with a syntax error and verify passed it: the harness "
                                  "does not build the source it is given, so candidates are not what gets measured")
    return failed_check(name, f"build accepted a kernel with a syntax error; it was only stopped later "
                              f"({_worker_detail(evaluation)}): build must reject source that does not parse")


def check_incorrect_rejected(evaluation: Evaluation | None, cases: Sequence[Case], how: str,
                             problem: str | None = None) -> CheckResult:
    name = "negative_incorrect_output"
    if evaluation is None:
        return failed_check(name, problem or "the incorrect variant was not evaluated")
    details = {"perturbation": how}
    if evaluation.status is EvaluationStatus.INCORRECT:
        by_id = {m.case_id: m for m in evaluation.cases}
        missed = [c.case_id for c in cases if c.protected and by_id.get(c.case_id) and by_id[c.case_id].correct]
        caught = [c.case_id for c in cases if by_id.get(c.case_id) and by_id[c.case_id].correct is False]
        details.update(caught=caught, missed=missed)
        if missed:
            return failed_check(name, f"protected case(s) {', '.join(missed)} accept an incorrect kernel ({how}); "
                                      f"only {', '.join(caught)} reject it", **details)
        return passed_check(name, f"verify rejects an incorrect kernel on every protected case ({how})", **details)
    if evaluation.status is EvaluationStatus.OK:
        return failed_check(name, f"verify accepted an incorrect kernel on every case ({how}): the bundle cannot "
                                  "catch bad candidates", **details)
    return failed_check(name, f"the incorrect variant should fail verify but ended {_worker_detail(evaluation)}; "
                              "the bundle's ability to catch wrong outputs is unproven", **details)
