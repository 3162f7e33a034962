"""Bundle preflight: prove the bundle can judge candidates before any run.

`tlx-agent validate` (`full_validation`) runs, each in a fresh sandboxed worker exactly like a run's
evaluations (the bundle is frozen into `<output>/bundle/` first, so a harness that needs files next to it
fails here, not later):

- device: the target's backend/architecture and `--arch` against the device the harness sees (probe);
- build + verify of the untouched kernel (every protected case must pass), in the first worker;
- benchmark stability: the first worker and at least two more fresh ones benchmark every case; per case
  the worst within-worker CV and the spread of the per-worker medians must stay within `--max-cv`;
- profile: when the harness profiles and a profiler is available, the main launch must be the intended
  kernel (target `main_scope`, else the only Triton kernel); otherwise a stated skip;
- negative tests: a syntactically invalid variant must fail build, an incorrect one must fail verify;
- the inputs must not change while all this runs.

It writes `bundle.lock.json` (orchestrator/preflight/lock_report.py). `optimize` runs a cheaper built-in
preflight (`builtin_validation`: device and both negative tests side by side, the untouched kernel only
when a negative test fails, no benchmark) unless it gets a matching `--bundle-lock` or `--skip-validation`;
benchmark stability is the validate command's job because a run re-measures anyway and three extra timing
workers would triple the baseline's cost; optimize's side of it (its order, the lock, the run's workers) is
orchestrator/preflight/for_optimize.py. The verdicts themselves are orchestrator/preflight/checks.py.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import trio

from orchestrator.autotune.lines import autotune_check
from orchestrator.autotune.step import AutotuneStepFailed, StepWorkers, run_step
from orchestrator.bundle import arch as arch_mod
from orchestrator.bundle.inputs import FrozenBundle, Inputs, freeze_bundle
from orchestrator.decision.timing_modes import fixed_modes, learn_modes
from orchestrator.ledger.live_log import LiveLog, quote
from orchestrator.preflight.checks import (
    check_build,
    check_device,
    check_incorrect_rejected,
    check_invalid_rejected,
    check_profile,
    check_stability,
    check_verdict_process,
    check_verify,
    check_work_figures,
    skipped_check,
)
from orchestrator.preflight.lock_report import build_lock, report_lines, write_lock
from orchestrator.preflight.negative_variants import NegativeVariantError, incorrect_variant, invalid_variant
from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation, sandbox_for
from orchestrator.worker.process import Spawner, SubprocessSpawner
from orchestrator.worker.process_tree import become_subreaper
from orchestrator.worker.verdict_fallback import settle_verdict_process, worker_target
from protocol.autotune import AutotuneRecord, AutotuneSetup
from protocol.bundle import Budget, Case
from protocol.lock import BundleLock, CaseStability, CheckResult
from protocol.profile import ProfileRequest, resolve_native_profiler
from protocol.results import Evaluation, EvaluationStatus

MIN_BENCHMARK_WORKERS = 3


@dataclass
class Settings:
    max_cv: float = Budget().max_cv
    repetitions: int = Budget().benchmark_repetitions
    phase_seconds: float = Budget().max_candidate_seconds
    benchmark_workers: int = MIN_BENCHMARK_WORKERS
    isolation: Literal["strict", "standard", "off"] = "standard"
    worker_python: str = sys.executable
    data_limit_bytes: int | None = None
    profile: bool = True
    arch: str | None = None
    # Why benchmark stability is reported but not judged (the CPU interpreter at its default), else None.
    stability_not_judged: str | None = None
    autotune_seconds: float = Budget().max_autotune_seconds  # the untouched kernel's one autotune step

    def to_json(self) -> dict[str, Any]:
        return {"max_cv": self.max_cv, "benchmark_repetitions": self.repetitions,
                "max_candidate_seconds": self.phase_seconds, "benchmark_workers": self.benchmark_workers,
                "isolation": self.isolation, "worker_python": self.worker_python,
                "data_limit_bytes": self.data_limit_bytes, "profile": self.profile, "arch": self.arch,
                "stability_not_judged": self.stability_not_judged, "max_autotune_seconds": self.autotune_seconds}


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
    verdict_fallback: str = ""  # why workers run verdicts in the candidate's process (worker/verdict_fallback.py)
    timing_modes: dict[str, str] = field(default_factory=dict)  # decision/timing_modes.py
    # the untouched kernel's own autotune choice, pinned in every worker (orchestrator/autotune/)
    autotune: AutotuneRecord | None = None

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
            from orchestrator.ledger.reporting import safe_name

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
        isolation = sandbox_for(self.settings.isolation, work_dir, profile_dir,
                                data_limit_bytes=self.settings.data_limit_bytes,
                                phase_seconds=self.settings.phase_seconds)
        plan = EvaluationPlan(
            label=f"validate-{tag}", experiment_id=tag, run_id=self.run_id, kernel_path=kernel_path,
            harness_path=self.bundle.harness_path, cases=self.inputs.cases,
            target=worker_target(self.inputs.target, self.verdict_fallback),
            repetitions=self.settings.repetitions, work_dir=work_dir, log_path=self.work_root / f"worker-{tag}.log",
            deadline=trio.current_time() + self.settings.phase_seconds, phase_seconds=self.settings.phase_seconds,
            isolation=isolation, worker_python=self.settings.worker_python, benchmark=benchmark,
            profile_request=factory, timing_modes=fixed_modes(self.inputs.cases, self.timing_modes),
            autotune=AutotuneSetup(mode="pin", pins=self.autotune.pins() if self.autotune else []))
        self.log.progress(f"validate: {tag}")
        evaluation = await run_evaluation(plan, self.spawner, self.parent_env)
        learn_modes(self.timing_modes, evaluation)  # the stability workers are timed as the first one was
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

    async def autotune_step(self) -> CheckResult | None:
        """The untouched kernel's own autotune, once per key, before every other worker (orchestrator/autotune/);
        None when the kernel has no autotune list to choose from."""
        assert self.bundle is not None
        workers = StepWorkers(run_id=self.run_id, harness_path=self.bundle.harness_path, target=self.inputs.target,
                              cases=self.inputs.cases, work_root=self.work_root / "autotune", log=self.log,
                              spawner=self.spawner, parent_env=self.parent_env, isolation=self.settings.isolation,
                              worker_python=self.settings.worker_python, data_limit_bytes=self.settings.data_limit_bytes,
                              seconds=self.settings.autotune_seconds)
        try:
            self.autotune = await run_step(workers, self.inputs.kernel_source)
        except AutotuneStepFailed as exc:
            return CheckResult(name="autotune", status="failed", message=str(exc))
        return autotune_check(self.autotune) if self.autotune is not None else None

    async def run_full(self) -> tuple[list[CheckResult], list[CaseStability], Evaluation | None]:
        """The untouched kernel's autotune when it has one; build, verify, benchmark in N fresh workers
        (sequential: timing must not overlap), profile, then both negative tests side by side."""
        autotuned = await self.autotune_step()
        if autotuned is not None and autotuned.status == "failed":
            why = "not run: the untouched kernel's autotune step failed, so no worker could run it at its choice"
            return [autotuned, *[skipped_check(name, why) for name in (
                "build", "verify", "verdict_process", "benchmark_stability", "profile", "negative_invalid_source",
                "negative_incorrect_output")]], [], None
        untouched = self.write_kernel("untouched", self.inputs.kernel_source)
        profile = self.settings.profile and "profile" in self.inputs.harness_functions

        async def in_candidate_process(reason: str) -> Evaluation:
            self.verdict_fallback = reason  # what this preflight's workers are given from here on
            return await self.evaluate("untouched-1-candidate-process", untouched, benchmark=True, profile=profile)

        # as optimize's baseline does, said as a check of its own
        judged = await self.evaluate("untouched-1", untouched, benchmark=True, profile=profile)
        first, self.verdict_fallback = await settle_verdict_process(self.inputs.target, judged, lambda reason: self.log.event(
            f"validate verdict_fallback=candidate reason={quote(reason, 700)}"), in_candidate_process)
        checks = [*([autotuned] if autotuned else []), check_build(first),
                  check_verify(first, self.inputs.cases, self.autotune),
                  check_verdict_process(self.inputs.target, first if self.verdict_fallback else judged, self.verdict_fallback)]
        stability: list[CaseStability] = []
        if first.status is EvaluationStatus.OK:
            evaluations = [first]
            for index in range(2, self.settings.benchmark_workers + 1):
                evaluations.append(await self.evaluate(f"untouched-{index}", untouched, benchmark=True))
            stability_check, stability = check_stability(evaluations, self.inputs.cases, self.settings.max_cv,
                                                         self.settings.stability_not_judged)
            checks.append(stability_check)
            work = check_work_figures(first)
            if work.details.get("warning"):
                self.log.event(f"validate warning={quote(work.message.removeprefix('warning: '))}")
            checks.append(work)
        else:
            checks.append(skipped_check("benchmark_stability",
                                        "not measured: the untouched kernel failed before benchmarking"))
        checks.append(check_profile(first, self.inputs.target, self.inputs.harness_functions, self.settings.profile))
        if checks[1].status == "passed":
            checks += await self.negatives()  # where the stable workers ran: judged, or as the fallback said
        else:
            why = "not run: the untouched kernel already fails build or verify, so a rejection would prove nothing"
            checks += [skipped_check(name, why) for name in ("negative_invalid_source", "negative_incorrect_output")]
        return checks, stability, first

    async def run_builtin(self) -> tuple[list[CheckResult], Evaluation | None]:
        """optimize's preflight: both negative tests side by side, no benchmark. The untouched kernel's build
        and verify are the baseline evaluation's job; it is evaluated here only when a negative test failed,
        to tell a weak bundle from a kernel that is broken anyway (which the baseline then reports)."""
        negatives = await self.negatives()
        if all(check.status == "passed" for check in negatives):
            left = "left to the baseline evaluation (it stops the run with exit 1 if this fails)"
            return [skipped_check("build", left), skipped_check("verify", left), *negatives], None
        untouched = self.write_kernel("untouched", self.inputs.kernel_source)
        first = await self.evaluate("untouched", untouched, benchmark=False)
        if first.status is not EvaluationStatus.OK:
            why = (f"not judged: the untouched kernel itself fails ({first.status.value}); the baseline evaluation "
                   "reports it")
            return [skipped_check("build", why), skipped_check("verify", why),
                    *[skipped_check(check.name, why, original=check.message) for check in negatives]], first
        return [check_build(first), check_verify(first, self.inputs.cases, self.autotune), *negatives], first


# ---- the two preflights ---------------------------------------------------------------------------------


def full_validation(inputs: Inputs, *, settings: Settings, arch: arch_mod.ArchSpec | None, work_root: Path,
                    log: LiveLog, parent_env: dict[str, str]) -> BundleLock:
    """`tlx-agent validate`'s preflight (see the module doc); the returned lock is also written to work_root."""
    view = arch_mod.observe_device(inputs.target, arch, settings.worker_python, parent_env)
    device_check = check_device(inputs.target, view, arch)
    preflight = Preflight(inputs=inputs, settings=settings, work_root=work_root, log=log, parent_env=parent_env)
    bundle = preflight.freeze()
    become_subreaper()  # as in a run: orphans of a worker re-parent to us, so the sweep reaps them
    checks, stability, first = trio.run(preflight.run_full)
    lock = build_lock(inputs=inputs, bundle=bundle, settings=settings.to_json(), view=view,
                      checks=[device_check, *checks], stability=stability, first=first, output_dir=work_root,
                      mode="validate")
    lock_path = write_lock(lock, work_root)
    for line in report_lines(lock):
        log.event(line)
    log.event(f"validate lock={str(lock_path)!r}")
    return lock


async def builtin_validation(inputs: Inputs, *, settings: Settings, work_root: Path, log: LiveLog,
                             view: arch_mod.DeviceView, arch: arch_mod.ArchSpec | None,
                             parent_env: dict[str, str], autotune: AutotuneRecord | None = None,
                             spawner: Spawner) -> BundleLock:
    """optimize's preflight (see the module doc); the returned lock is also written to work_root. `autotune`:
    the choice optimize's own autotune step made, which these workers pin; `spawner`: the run's (its fork
    server), so the preflight's workers pay no imports of their own."""
    work_root.mkdir(parents=True, exist_ok=True)
    preflight = Preflight(inputs=inputs, settings=settings, work_root=work_root, log=log, parent_env=parent_env,
                          autotune=autotune, spawner=spawner)
    bundle = preflight.freeze()
    log.event("validate status=builtin (device and negative tests; the baseline evaluation builds and verifies; "
              "run tlx-agent validate for benchmark stability and profile checks, then pass --bundle-lock)")
    become_subreaper()
    checks, first = await preflight.run_builtin()
    lock = build_lock(inputs=inputs, bundle=bundle, settings=settings.to_json(), view=view,
                      checks=[check_device(inputs.target, view, arch), *checks], stability=[], first=first,
                      output_dir=work_root, mode="builtin")
    write_lock(lock, work_root)
    for line in report_lines(lock):
        log.event(line)
    return lock
