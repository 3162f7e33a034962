"""Bundle preflight (seed Layer 1 steps 4-6): prove the bundle can judge candidates before any run.

`tlx-agent validate` runs, each in a fresh sandboxed worker exactly like a run's evaluations (the bundle
is frozen into `<output>/bundle/` first, so a harness that needs files next to it fails here, not later):

- device: the target's backend/architecture and `--arch` against the device the harness sees (probe);
- build + verify of the untouched kernel (every protected case must pass), in the first worker;
- benchmark stability: the first worker and at least two more fresh ones benchmark every case; per case
  the worst within-worker CV and the spread of the per-worker medians must stay within `--max-cv`;
- profile: when the harness profiles and a profiler is available, the main launch must be the intended
  kernel (target `main_scope`, else the only Triton kernel); otherwise a stated skip;
- negative tests: a syntactically invalid variant must fail build, an incorrect one must fail verify;
- the inputs must not change while all this runs.

It writes `bundle.lock.json` (stdout and the output dir). `optimize` runs a cheaper built-in preflight
(`builtin_validation`: device, build + verify and both negative tests, three workers side by side, no
benchmark) unless it gets a matching `--bundle-lock` or `--skip-validation`; benchmark stability is the
validate command's job because a run re-measures anyway and three extra timing workers would triple
the baseline's cost.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from pydantic import ValidationError

from orchestrator.bundle import arch as arch_mod
from orchestrator.bundle.inputs import FrozenBundle, Inputs, freeze_bundle, load_inputs, merge_budget
from orchestrator.bundle.lock import (
    LOCK_NAME,
    BundleLock,
    CaseStability,
    CheckResult,
    lock_files,
)
from orchestrator.preflight.negative_variants import NegativeVariantError, incorrect_variant, invalid_variant
from orchestrator.run.ledger.artifacts import OutputDirError, prepare_output_dir, write_json
from orchestrator.run.ledger.live_log import LiveLog, quote
from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import Spawner, SubprocessSpawner
from orchestrator.worker.process_tree import become_subreaper
from protocol.bundle import Budget, BundleError, Case, Target, describe_validation_error
from protocol.outcome import ExitCode
from protocol.profile import ProfileRequest, resolve_native_profiler
from protocol.results import Evaluation, EvaluationStatus
from protocol.worker import IsolationConfig

MIN_BENCHMARK_WORKERS = 3


@dataclass
class Settings:
    max_cv: float = Budget().max_cv
    repetitions: int = Budget().benchmark_repetitions
    phase_seconds: float = Budget().max_candidate_seconds
    benchmark_workers: int = MIN_BENCHMARK_WORKERS
    isolation: str = "standard"
    worker_python: str = sys.executable
    data_limit_bytes: int | None = None
    profile: bool = True
    arch: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"max_cv": self.max_cv, "benchmark_repetitions": self.repetitions,
                "max_candidate_seconds": self.phase_seconds, "benchmark_workers": self.benchmark_workers,
                "isolation": self.isolation, "worker_python": self.worker_python,
                "data_limit_bytes": self.data_limit_bytes, "profile": self.profile, "arch": self.arch}


def _passed(name: str, message: str, **details: Any) -> CheckResult:
    return CheckResult(name=name, status="passed", message=message, details=details)


def _failed(name: str, message: str, **details: Any) -> CheckResult:
    return CheckResult(name=name, status="failed", message=message, details=details)


def _skipped(name: str, message: str, **details: Any) -> CheckResult:
    return CheckResult(name=name, status="skipped", message=message, details=details)


# ---- pure checks over evaluations ----------------------------------------------------------------------


def check_device(target: Target, view: arch_mod.DeviceView, arch: arch_mod.ArchSpec | None) -> CheckResult:
    problems = [p for p in (arch_mod.target_mismatch(target, view),
                            arch_mod.arch_mismatch(arch, view) if arch else None) if p]
    details = {"device": view.to_json(), "arch": arch.name if arch else None}
    if problems:
        return _failed("device", "; ".join(problems), **details)
    said = f"--arch {arch.name} matches: " if arch else ""
    return _passed("device", said + view.describe(), **details)


def _worker_detail(evaluation: Evaluation) -> str:
    return f"{evaluation.status.value}: {evaluation.reason or 'no reason given'} (worker log: {evaluation.worker.log_path})"


def check_build(evaluation: Evaluation) -> CheckResult:
    if evaluation.status is EvaluationStatus.BUILD_FAILED or (evaluation.status is not EvaluationStatus.OK
                                                              and not evaluation.cases):
        return _failed("build", f"the untouched kernel does not build: {_worker_detail(evaluation)}")
    return _passed("build", "the untouched kernel builds")


def check_verify(evaluation: Evaluation, cases: Sequence[Case]) -> CheckResult:
    if not evaluation.cases:
        return _skipped("verify", "not reached: the untouched kernel did not build")
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
        return _failed("verify", f"protected case(s) {', '.join(failed_protected)} fail on the untouched kernel "
                                 f"(first: {first.diagnostics or 'verify returned false'})", **details)
    if unverified:
        return _failed("verify", f"case(s) {', '.join(unverified)} were not verified: {_worker_detail(evaluation)}",
                       **details)
    note = f"; unprotected case(s) {', '.join(failed_other)} fail (diagnostic only)" if failed_other else ""
    return _passed("verify", f"{len(cases)} case(s) verified, every protected case passes{note}", **details)


def check_stability(evaluations: Sequence[Evaluation], cases: Sequence[Case],
                    max_cv: float) -> tuple[CheckResult, list[CaseStability]]:
    """Within-worker CV (the promotion gate) and between-worker median spread, per case, against max_cv."""
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
    if problems:
        return _failed("benchmark_stability", "; ".join(problems), **details), rows
    summary = ", ".join(f"{r.case_id} median {r.median_us:.3f} us spread {r.median_spread:.2%} worst cv "
                        f"{r.max_cv:.4f}" for r in rows if r.median_us is not None and r.median_spread is not None
                        and r.max_cv is not None)
    return _passed("benchmark_stability", f"{len(evaluations)} fresh workers within --max-cv {max_cv:.4f}: {summary}",
                   **details), rows


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


def check_profile(evaluation: Evaluation | None, target: Target, harness_functions: Sequence[str],
                  enabled: bool) -> CheckResult:
    if not enabled:
        return _skipped("profile", "profiling disabled (--no-profile)")
    if "profile" not in harness_functions:
        return _skipped("profile", "the harness defines no profile(); the main launch cannot be checked")
    profiled = [(m.case_id, m.profile) for m in (evaluation.cases if evaluation else []) if m.profile]
    if not profiled:
        return _skipped("profile", "no case was profiled (the untouched kernel did not get that far)")
    verdicts = {case_id: profile_case_verdict(profile, target.main_scope) for case_id, profile in profiled}
    ncu_notes = {case_id: (profile.get("ncu") or {}).get("diagnostics", [])[:1] for case_id, profile in profiled
                 if isinstance(profile.get("ncu"), dict) and not profile["ncu"].get("available", True)}
    details = {"cases": {cid: {"status": s, "message": m} for cid, (s, m) in verdicts.items()},
               "ncu_unavailable": ncu_notes, "main_scope": target.main_scope}
    failed = {cid: m for cid, (s, m) in verdicts.items() if s == "failed"}
    if failed:
        return _failed("profile", "; ".join(f"case {cid}: {m}" for cid, m in failed.items()), **details)
    passed = {cid: m for cid, (s, m) in verdicts.items() if s == "passed"}
    if passed:
        first_id, first = next(iter(passed.items()))
        return _passed("profile", f"{len(passed)}/{len(verdicts)} case(s) attribute the main launch (case {first_id}: "
                                  f"{first})", **details)
    reason = next(iter(verdicts.values()))[1]
    return _skipped("profile", f"no profiler available here, main launch not checked: {reason}", **details)


def check_invalid_rejected(evaluation: Evaluation | None, problem: str | None = None) -> CheckResult:
    name = "negative_invalid_source"
    if evaluation is None:
        return _failed(name, problem or "the invalid variant was not evaluated")
    if evaluation.status is EvaluationStatus.BUILD_FAILED:
        return _passed(name, f"build rejects a kernel with a syntax error ({evaluation.reason})")
    if evaluation.status is EvaluationStatus.OK:
        return _failed(name, "build accepted a kernel with a syntax error and verify passed it: the harness does not "
                             "build the source it is given, so candidates are not what gets measured")
    return _failed(name, f"build accepted a kernel with a syntax error; it was only stopped later "
                         f"({_worker_detail(evaluation)}): build must reject source that does not parse")


def check_incorrect_rejected(evaluation: Evaluation | None, cases: Sequence[Case], how: str,
                             problem: str | None = None) -> CheckResult:
    name = "negative_incorrect_output"
    if evaluation is None:
        return _failed(name, problem or "the incorrect variant was not evaluated")
    details = {"perturbation": how}
    if evaluation.status is EvaluationStatus.INCORRECT:
        by_id = {m.case_id: m for m in evaluation.cases}
        missed = [c.case_id for c in cases if c.protected and by_id.get(c.case_id) and by_id[c.case_id].correct]
        caught = [c.case_id for c in cases if by_id.get(c.case_id) and by_id[c.case_id].correct is False]
        details.update(caught=caught, missed=missed)
        if missed:
            return _failed(name, f"protected case(s) {', '.join(missed)} accept an incorrect kernel ({how}); only "
                                 f"{', '.join(caught)} reject it", **details)
        return _passed(name, f"verify rejects an incorrect kernel on every protected case ({how})", **details)
    if evaluation.status is EvaluationStatus.OK:
        return _failed(name, f"verify accepted an incorrect kernel on every case ({how}): the bundle cannot catch "
                             "bad candidates", **details)
    return _failed(name, f"the incorrect variant should fail verify but ended {_worker_detail(evaluation)}; "
                         "the bundle's ability to catch wrong outputs is unproven", **details)


# ---- running workers ------------------------------------------------------------------------------------


@dataclass
class Preflight:
    """The workers of one preflight; every worker is a fresh sandboxed evaluation as in a run."""

    inputs: Inputs
    settings: Settings
    work_root: Path
    log: LiveLog
    spawner: Spawner = field(default_factory=SubprocessSpawner)
    parent_env: dict[str, str] = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: "validate-" + uuid.uuid4().hex[:8])
    bundle: FrozenBundle | None = None

    def freeze(self) -> FrozenBundle:
        self.bundle = freeze_bundle(self.inputs, self.work_root)
        return self.bundle

    def write_kernel(self, name: str, source: str) -> Path:
        directory = self.work_root / "kernels"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        return path

    def profile_factory(self, tag: str):
        base = self.work_root / "profile_artifacts" / tag

        def factory(case: Case) -> ProfileRequest | None:
            from orchestrator.run.ledger.reporting import safe_name

            request = ProfileRequest(level="summary", experiment_id=tag, reason="bundle validation",
                                     artifacts_dir=str(base / safe_name(case.case_id)))
            return resolve_native_profiler(request, self.inputs.target.backend)[0]

        return factory, base

    async def evaluate(self, tag: str, kernel_path: Path, *, benchmark: bool, profile: bool = False) -> Evaluation:
        assert self.bundle is not None
        work_dir = self.work_root / "workers" / tag
        factory, profile_dir = self.profile_factory(tag) if profile else (None, None)
        if profile_dir is not None:
            profile_dir.mkdir(parents=True, exist_ok=True)
        writable = [str(work_dir)] + ([str(profile_dir)] if profile_dir is not None else [])
        isolation = IsolationConfig(mode=self.settings.isolation, scratch_dir=str(work_dir), writable_dirs=writable,
                                    data_limit_bytes=self.settings.data_limit_bytes,
                                    cpu_seconds=int(self.settings.phase_seconds * 2) + 10)
        plan = EvaluationPlan(
            label=f"validate-{tag}", experiment_id=tag, run_id=self.run_id, kernel_path=kernel_path,
            harness_path=self.bundle.harness_path, target=self.inputs.target, cases=self.inputs.cases,
            repetitions=self.settings.repetitions, work_dir=work_dir, log_path=self.work_root / f"worker-{tag}.log",
            deadline=trio.current_time() + self.settings.phase_seconds, phase_seconds=self.settings.phase_seconds,
            isolation=isolation, worker_python=self.settings.worker_python, benchmark=benchmark,
            profile_request=factory)
        self.log.progress(f"validate: {tag}")
        evaluation = await run_evaluation(plan, self.spawner, self.parent_env)
        self.log.event(f"validate worker={tag} status={evaluation.status.value}"
                       + (f" reason={quote(evaluation.reason)}" if evaluation.reason else "")
                       + f" wall_s={evaluation.worker.wall_seconds:.2f}")
        return evaluation

    def variants(self) -> tuple[Path, Path | None, str, str | None]:
        """Paths of the invalid and incorrect variants (None + why when no incorrect one can be made)."""
        source = self.inputs.kernel_source
        invalid = self.write_kernel("negative_invalid", invalid_variant(source))
        try:
            wrong_source, how = incorrect_variant(source)
        except NegativeVariantError as exc:
            return invalid, None, "", str(exc)
        return invalid, self.write_kernel("negative_incorrect", wrong_source), how, None

    async def negatives(self) -> list[CheckResult]:
        invalid_path, incorrect_path, how, problem = self.variants()
        results: dict[str, Evaluation] = {}

        async def one(tag: str, path: Path) -> None:
            results[tag] = await self.evaluate(tag, path, benchmark=False)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, "negative-invalid", invalid_path)
            if incorrect_path is not None:
                nursery.start_soon(one, "negative-incorrect", incorrect_path)
        return [check_invalid_rejected(results.get("negative-invalid")),
                check_incorrect_rejected(results.get("negative-incorrect"), self.inputs.cases, how, problem)]

    async def run_full(self) -> tuple[list[CheckResult], list[CaseStability], Evaluation | None]:
        """build, verify, benchmark in N fresh workers (sequential: timing must not overlap), profile,
        then both negative tests side by side."""
        untouched = self.write_kernel("untouched", self.inputs.kernel_source)
        profile = self.settings.profile and "profile" in self.inputs.harness_functions
        first = await self.evaluate("untouched-1", untouched, benchmark=True, profile=profile)
        checks = [check_build(first), check_verify(first, self.inputs.cases)]
        stability: list[CaseStability] = []
        if first.status is EvaluationStatus.OK:
            evaluations = [first]
            for index in range(2, self.settings.benchmark_workers + 1):
                evaluations.append(await self.evaluate(f"untouched-{index}", untouched, benchmark=True))
            stability_check, stability = check_stability(evaluations, self.inputs.cases, self.settings.max_cv)
            checks.append(stability_check)
        else:
            checks.append(_skipped("benchmark_stability", "not measured: the untouched kernel failed before "
                                                          "benchmarking"))
        checks.append(check_profile(first, self.inputs.target, self.inputs.harness_functions, self.settings.profile))
        if checks[1].status == "passed":
            checks += await self.negatives()
        else:
            checks += [_skipped(name, "not run: the untouched kernel already fails build or verify, so a rejection "
                                      "would prove nothing") for name in ("negative_invalid_source",
                                                                          "negative_incorrect_output")]
        return checks, stability, first

    async def run_builtin(self) -> tuple[list[CheckResult], Evaluation | None]:
        """optimize's preflight: both negative tests side by side, no benchmark. The untouched kernel's build
        and verify are the baseline evaluation's job; it is evaluated here only when a negative test failed,
        to tell a weak bundle from a kernel that is broken anyway (which the baseline then reports)."""
        negatives = await self.negatives()
        if all(check.status == "passed" for check in negatives):
            left = "left to the baseline evaluation (it stops the run with exit 1 if this fails)"
            return [_skipped("build", left), _skipped("verify", left), *negatives], None
        untouched = self.write_kernel("untouched", self.inputs.kernel_source)
        first = await self.evaluate("untouched", untouched, benchmark=False)
        if first.status is not EvaluationStatus.OK:
            why = (f"not judged: the untouched kernel itself fails ({first.status.value}); the baseline evaluation "
                   "reports it")
            return [_skipped("build", why), _skipped("verify", why),
                    *[_skipped(check.name, why, original=check.message) for check in negatives]], first
        return [check_build(first), check_verify(first, self.inputs.cases), *negatives], first


# ---- lock document --------------------------------------------------------------------------------------


def _versions(evaluation: Evaluation | None) -> dict[str, Any]:
    versions: dict[str, Any] = {"orchestrator_python": sys.version.split()[0]}
    for name in ("tlx-agent", "trio", "pydantic"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    versions["worker"] = dict(evaluation.worker.versions) if evaluation else {}
    return versions


def build_lock(*, inputs: Inputs, bundle: FrozenBundle, settings: Settings, view: arch_mod.DeviceView,
               checks: list[CheckResult], stability: list[CaseStability], first: Evaluation | None,
               output_dir: Path, mode: str) -> BundleLock:
    files = lock_files(inputs)
    # what the workers saw is the frozen copy; the lock names the originals, which must still hash the same
    frozen_roles = {"kernel": "kernel.py", "harness": "harness.py", "cases": "cases.json", "target": "target.json",
                    "budget": "budget.json", "reference_kernel": "reference_kernel.py"}
    drifted = [role for role, entry in files.items() if bundle.files.get(frozen_roles[role]) != entry.sha256]
    if drifted:
        checks = [*checks, _failed("bundle_unchanged", "input file(s) changed while validating: " + ", ".join(
            f"{role} {files[role].path}" for role in drifted) + "; validate again once they are final")]
    else:
        checks = [*checks, _passed("bundle_unchanged", "no input file changed while validating")]
    failed = [check.name for check in checks if check.status == "failed"]
    device = view.to_json()
    device["worker_device"] = first.worker.device if first else None
    target = inputs.target
    return BundleLock(
        created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), mode=mode, passed=not failed,
        failed_checks=failed, files=files, harness_functions=list(inputs.harness_functions),
        case_ids=[c.case_id for c in inputs.cases], protected_case_ids=[c.case_id for c in inputs.cases if c.protected],
        target={"backend": target.backend, "architecture": target.architecture, "device": target.device,
                "main_scope": target.main_scope, "environment": dict(target.environment)},
        settings=settings.to_json(), device=device, checks=checks, stability=stability, versions=_versions(first),
        output_dir=str(output_dir))


def report_lines(lock: BundleLock) -> list[str]:
    lines = [f"validate check={check.name} status={check.status} {quote(check.message, 600)}" for check in lock.checks]
    for row in lock.stability:
        lines.append(f"validate case={row.case_id} protected={row.protected} median_us="
                     f"{'n/a' if row.median_us is None else f'{row.median_us:.3f}'} spread="
                     f"{'n/a' if row.median_spread is None else f'{row.median_spread:.4f}'} worst_cv="
                     f"{'n/a' if row.max_cv is None else f'{row.max_cv:.4f}'} workers={len(row.medians_us)} "
                     f"stable={row.stable}")
    verdict = "PASSED" if lock.passed else f"FAILED ({', '.join(lock.failed_checks)})"
    lines.append(f"validate result={verdict}")
    return lines


# ---- entry points ---------------------------------------------------------------------------------------


def _absolute(path: Path | None) -> Path | None:
    return None if path is None else path.expanduser().resolve()


def resolve_arch_flag(value: str | None) -> arch_mod.ArchSpec | None:
    if value is None:
        return None
    try:
        return arch_mod.resolve_arch(value)
    except ValueError as exc:
        raise BundleError(str(exc)) from None


def load_validate_inputs(args: argparse.Namespace) -> tuple[Inputs, Budget]:
    inputs = load_inputs(kernel=_absolute(args.kernel), harness=_absolute(args.harness), cases=_absolute(args.cases),
                         target=_absolute(args.target), budget=_absolute(args.budget),
                         reference_kernel=_absolute(args.reference_kernel))
    cli_budget = {"max_cv": args.max_cv, "benchmark_repetitions": args.benchmark_repetitions,
                  "max_candidate_seconds": args.max_candidate_seconds}
    try:
        budget = merge_budget(cli_budget, inputs.budget_overrides)
    except ValidationError as exc:
        raise BundleError(describe_validation_error(Path("command line"), exc)) from None
    return inputs, budget


def validate_main(args: argparse.Namespace, argv: list[str]) -> int:
    from orchestrator.cli.output import emit, fail

    inputs, budget = load_validate_inputs(args)
    arch = resolve_arch_flag(args.arch)
    if args.benchmark_workers < MIN_BENCHMARK_WORKERS:
        raise BundleError(f"--benchmark-workers must be at least {MIN_BENCHMARK_WORKERS}, got {args.benchmark_workers}")
    settings = Settings(max_cv=budget.max_cv, repetitions=budget.benchmark_repetitions,
                        phase_seconds=budget.max_candidate_seconds, benchmark_workers=args.benchmark_workers,
                        isolation=args.isolation, worker_python=args.worker_python,
                        data_limit_bytes=int(args.data_limit_gib * (1 << 30)) if args.data_limit_gib else None,
                        profile=args.profile, arch=args.arch)
    if args.output_dir is not None:
        try:
            output_dir = prepare_output_dir(_absolute(args.output_dir))  # type: ignore[arg-type]
        except OutputDirError as exc:
            return fail(str(exc))
    else:
        output_dir = Path(tempfile.mkdtemp(prefix="tlx-agent-validate-")).resolve()
    log = LiveLog()
    log.attach_file(output_dir / "validate.log")
    log.event(f"validate kernel={str(inputs.kernel_path)!r} harness={str(inputs.harness_path)!r} "
              f"cases={str(inputs.cases_path)!r} target={str(inputs.target_path)!r} output_dir={str(output_dir)!r} "
              f"benchmark_workers={settings.benchmark_workers} max_cv={settings.max_cv}")
    view = arch_mod.observe_device(inputs.target, arch, settings.worker_python)
    device_check = check_device(inputs.target, view, arch)
    preflight = Preflight(inputs=inputs, settings=settings, work_root=output_dir, log=log,
                          parent_env=dict(os.environ))
    bundle = preflight.freeze()
    become_subreaper()  # as in a run: orphans of a worker re-parent to us, so the sweep reaps them
    try:
        checks, stability, first = trio.run(preflight.run_full)
    except KeyboardInterrupt:
        log.close()
        return fail("interrupted", ExitCode.INTERRUPTED)
    lock = build_lock(inputs=inputs, bundle=bundle, settings=settings, view=view, checks=[device_check, *checks],
                      stability=stability, first=first, output_dir=output_dir, mode="validate")
    lock_path = output_dir / LOCK_NAME
    lock.lock_path = str(lock_path)
    write_json(lock_path, lock)
    for line in report_lines(lock):
        log.event(line)
    log.event(f"validate lock={str(lock_path)!r}")
    log.close()
    emit(lock.model_dump(mode="json"))
    return ExitCode.OK if lock.passed else ExitCode.ERROR


def builtin_validation(inputs: Inputs, *, settings: Settings, work_root: Path, log: LiveLog,
                       view: arch_mod.DeviceView, arch: arch_mod.ArchSpec | None,
                       parent_env: dict[str, str]) -> BundleLock:
    """optimize's preflight (see the module doc); the returned lock is also written to work_root."""
    work_root.mkdir(parents=True, exist_ok=True)
    preflight = Preflight(inputs=inputs, settings=settings, work_root=work_root, log=log, parent_env=parent_env)
    bundle = preflight.freeze()
    log.event("validate status=builtin (device and negative tests; the baseline evaluation builds and verifies; "
              "run tlx-agent validate for benchmark stability and profile checks, then pass --bundle-lock)")
    become_subreaper()
    checks, first = trio.run(preflight.run_builtin)
    lock = build_lock(inputs=inputs, bundle=bundle, settings=settings, view=view,
                      checks=[check_device(inputs.target, view, arch), *checks], stability=[], first=first,
                      output_dir=work_root, mode="builtin")
    lock.lock_path = str(work_root / LOCK_NAME)
    write_json(work_root / LOCK_NAME, lock)
    for line in report_lines(lock):
        log.event(line)
    return lock


# ---- optimize's side ------------------------------------------------------------------------------------


def _device_identity(device: dict[str, Any]) -> tuple[Any, ...]:
    capability = device.get("capability")
    return (device.get("kind"), device.get("name") if device.get("kind") == arch_mod.CUDA else None,
            tuple(capability) if capability else None)


def optimize_preflight(config: Any, inputs: Inputs) -> tuple[arch_mod.DeviceView | None, arch_mod.ArchSpec | None,
                                                             dict[str, Any] | None]:
    """Before optimize creates its output dir: `--arch`, the target against the device, `--bundle-lock`.

    Raises `BundleError` with one line naming what does not match. Returns the device view, the arch, and
    with a lock its summary (written to run.json).
    """
    from orchestrator.bundle.inputs import sha256_file
    from orchestrator.bundle.lock import load_lock, lock_summary, match_lock

    arch = resolve_arch_flag(config.arch)
    if config.bundle_lock is not None and config.skip_validation:
        raise BundleError("--bundle-lock and --skip-validation exclude each other; pass one of them")
    view = None
    if arch is not None or not config.skip_validation:
        view = arch_mod.observe_device(inputs.target, arch, config.worker_python)
        problem = arch_mod.arch_mismatch(arch, view) if arch is not None else None
        if problem is None and not config.skip_validation:
            problem = arch_mod.target_mismatch(inputs.target, view)
        if problem is not None:
            raise BundleError(problem)
    if config.bundle_lock is None:
        return view, arch, None
    lock_path = config.bundle_lock
    lock = load_lock(lock_path)
    if lock.mode != "validate":
        raise BundleError(f"{lock_path} was written by optimize's built-in preflight, which measures no stability; "
                          "run tlx-agent validate and pass its bundle.lock.json")
    match_lock(lock, lock_path, inputs)
    assert view is not None
    if _device_identity(lock.device) != _device_identity(view.to_json()):
        locked = arch_mod.DeviceView(kind=str(lock.device.get("kind")), device=str(lock.device.get("device")),
                                     name=lock.device.get("name"),  # type: ignore[arg-type]
                                     capability=tuple(lock.device["capability"]) if lock.device.get("capability")
                                     else None, interpreter=bool(lock.device.get("interpreter")))
        raise BundleError(f"{lock_path} was validated where {locked.describe()}, but now {view.describe()}; "
                          "validate the bundle on this device")
    locked_arch = arch_mod.lookup(str(lock.settings.get("arch") or ""))
    if arch is not None and locked_arch is not None and \
            (locked_arch.kind, locked_arch.cuda_major) != (arch.kind, arch.cuda_major):
        raise BundleError(f"{lock_path} was validated with --arch {locked_arch.name}, this run has --arch {arch.name}")
    summary = lock_summary(lock, lock_path, sha256_file(lock_path))
    warnings = []
    if config.budget.max_cv < float(lock.settings.get("max_cv", 0.0)):
        warnings.append(f"this run's --max-cv {config.budget.max_cv} is stricter than the {lock.settings['max_cv']} "
                        "the lock's stability check used")
    summary["warnings"] = warnings
    return view, arch, summary


def optimize_builtin(config: Any, inputs: Inputs, log: LiveLog, output_dir: Path,
                     view: arch_mod.DeviceView | None, arch: arch_mod.ArchSpec | None) -> str | None:
    """optimize's built-in preflight (after its output dir exists); returns the failure line, or None."""
    if config.skip_validation:
        log.event("validate status=skipped (--skip-validation): the bundle's ability to reject bad candidates "
                  "is unproven for this run")
        return None
    if config.bundle_lock is not None:
        summary = config.bundle_lock_summary or {}
        log.event(f"validate status=locked lock={str(config.bundle_lock)!r} created_at={summary.get('created_at')} "
                  "files=unchanged")
        for warning in summary.get("warnings", []):
            log.event(f"validate warning={quote(warning)}")
        return None
    assert view is not None
    settings = Settings(max_cv=config.budget.max_cv, repetitions=config.budget.benchmark_repetitions,
                        phase_seconds=config.budget.max_candidate_seconds, benchmark_workers=0,
                        isolation=config.isolation,
                        worker_python=config.worker_python, data_limit_bytes=config.data_limit_bytes, profile=False,
                        arch=config.arch)
    lock = builtin_validation(inputs, settings=settings, work_root=output_dir / "validation", log=log, view=view,
                              arch=arch, parent_env=dict(os.environ))
    from orchestrator.bundle.lock import lock_summary

    config.bundle_lock_summary = lock_summary(lock, None, None)
    if lock.passed:
        return None
    failed = [check for check in lock.checks if check.status == "failed"]
    return ("bundle preflight failed: " + "; ".join(f"{check.name}: {check.message}" for check in failed)
            + f" (details: {lock.lock_path}); fix the bundle, or pass --skip-validation to run anyway")
