"""The run's one way to evaluate a source: a fresh sandboxed worker, checked before and after.

The commit and profile steps receive this object, not the whole run: they can ask for an evaluation and
write to the run's log and records, nothing more. Every evaluation re-checks the frozen bundle and the
sources the run wrote (a candidate that got past the sandbox must not swap its rival's kernel). `Evaluates` is
what the run's steps use of it: a test hands them an object of that shape that returns recorded or synthetic
evaluations instead of starting workers (tests/run/fake_evaluator.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import trio

from orchestrator.bundle.inputs import FrozenBundle, Inputs, check_frozen
from orchestrator.decision.physics import physics_verdict
from orchestrator.decision.time_budget import profile_seconds_by_case
from orchestrator.decision.timing_modes import fixed_modes, learn_modes
from orchestrator.ledger import reporting
from orchestrator.ledger.artifacts import RunArtifacts
from orchestrator.ledger.config import RunConfig
from orchestrator.ledger.evaluations import FinishedEvaluation, write_finished
from orchestrator.ledger.live_log import LiveLog
from orchestrator.run.state import RunAborted, RunState
from orchestrator.source_digest import raw_digest
from orchestrator.worker.environment import triton_cache_dir
from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation, sandbox_for
from orchestrator.worker.kernel_cache import SourceKernelCache
from orchestrator.worker.process import Spawner, SubprocessSpawner
from orchestrator.worker.process_tree import end_leftovers
from orchestrator.worker.verdict_fallback import worker_target
from protocol.autotune import AutotuneSetup
from protocol.bundle import Case, Target
from protocol.outcome import ExitCode, StoppingReason
from protocol.profile import ProfileRequest, resolve_native_profiler
from protocol.results import Evaluation, EvaluationStatus
from protocol.roles import Role


class Evaluates(Protocol):
    """The run's evaluator as its steps see it: the run's inputs and records, and one evaluation per call."""

    config: RunConfig
    inputs: Inputs
    bundle: FrozenBundle
    artifacts: RunArtifacts
    log: LiveLog
    reusable: dict[tuple[str, str], FinishedEvaluation]
    kernel_cache: SourceKernelCache  # compiled kernels per source: compile ahead keeps into it, workers start from it

    def check_bundle(self, state: RunState) -> None: ...

    async def evaluate(self, state: RunState, *, role: Role, experiment_id: str, kernel_path: Path, tag: str,
                       deadline: float, profile_level: str | None = None, profile_reason: str = "candidate",
                       benchmark: bool = True, profile_until: float | None = None) -> Evaluation: ...


# how the run makes its evaluator once the bundle is frozen: `Evaluator`, or a test's fake
MakesEvaluator = Callable[[RunConfig, Inputs, FrozenBundle, RunArtifacts, LiveLog, "Spawner | None"], Evaluates]


class Evaluator:
    def __init__(self, config: RunConfig, inputs: Inputs, bundle: FrozenBundle, artifacts: RunArtifacts,
                 log: LiveLog, spawner: Spawner | None = None, parent_env: dict[str, str] | None = None) -> None:
        self.config = config
        self.inputs = inputs
        self.bundle = bundle
        self.artifacts = artifacts
        self.log = log
        self.spawner = spawner or SubprocessSpawner()
        self.parent_env = dict(os.environ) if parent_env is None else parent_env
        self.finished_workers: dict[str, str] = {}  # scratch dir -> evaluation, for `refuse_leftovers`
        # a resumed run's finished evaluations of experiments that had not finished (ledger/evaluations.py)
        self.reusable: dict[tuple[str, str], FinishedEvaluation] = {}
        # what each source's workers compiled, for its later workers only (worker/kernel_cache.py)
        self.kernel_cache = SourceKernelCache(artifacts.root / "kernel_cache")

    def profile_factory(self, experiment_id: str, level: str, reason: str, diagnostic: bool = False):
        if not self.config.profile:
            return None
        base_dir = self.artifacts.experiment_dir(experiment_id) / "profile_artifacts"
        extra = ({"tools": ["proton_intra_kernel"], "diagnostic_only": True, "granularity": "warp"}
                 if diagnostic else {})

        def factory(case: Case) -> ProfileRequest | None:
            request = ProfileRequest(level=level, experiment_id=experiment_id, reason=reason,
                                     artifacts_dir=str(base_dir / reporting.safe_name(case.case_id)), **extra)
            resolved, _diagnostics = resolve_native_profiler(request, self.inputs.target.backend)
            return resolved

        return factory

    def check_bundle(self, state: RunState) -> None:
        changed = check_frozen(self.bundle)
        if changed is not None:
            message = (f"frozen bundle file {self.bundle.path(changed)} changed during the run; the run cannot be "
                       "trusted and stops")
            state.stop(StoppingReason.BUNDLE_TAMPERED, message)
            raise RunAborted(ExitCode.ERROR, message, StoppingReason.BUNDLE_TAMPERED)

    def checked_source(self, state: RunState, kernel_path: Path) -> str | None:
        """The source about to be evaluated. One written earlier in the run (the incumbent, the baseline) must
        still be what was written."""
        try:
            source = kernel_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            source = None
        expected = state.written_sources.get(str(kernel_path))
        if expected is not None and (source is None or raw_digest(source) != expected):
            message = f"{kernel_path} changed after it was written; the run cannot be trusted and stops"
            state.stop(StoppingReason.BUNDLE_TAMPERED, message)
            raise RunAborted(ExitCode.ERROR, message, StoppingReason.BUNDLE_TAMPERED)
        return source

    async def refuse_leftovers(self) -> None:
        """Nothing of an earlier evaluation may run beside a measurement: kill what is left, stop if it stays."""
        killed, alive = await end_leftovers(self.finished_workers)
        for leftover in killed:
            self.log.event(f"leftover process killed: {leftover.describe()}")
        if alive:
            raise RunAborted(ExitCode.ERROR, f"a process of an earlier evaluation survives SIGKILL: "
                                             f"{alive[0].describe()}; the run stops instead of measuring beside it",
                             StoppingReason.LEFTOVER_PROCESS)

    async def evaluate(self, state: RunState, *, role: Role, experiment_id: str, kernel_path: Path, tag: str,
                       deadline: float, profile_level: str | None = None, profile_reason: str = "candidate",
                       benchmark: bool = True, profile_until: float | None = None) -> Evaluation:
        """One evaluation in a fresh worker. `deadline` is the run's (trio time); the worker's own is the earlier
        of it and `--max-candidate-seconds`. Its profiles may run until `profile_until` (the run's time for them,
        never later than `deadline`): one the run's time cuts is not taken, and the evaluation stands on its
        measurements; one that outlasts the worker's own limits while the run has time fails it, as before."""
        diagnostic = role is Role.DIAGNOSTIC
        if diagnostic and benchmark:
            raise ValueError("diagnostic-only instrumentation is never benchmarked")
        self.check_bundle(state)
        source = self.checked_source(state, kernel_path)
        experiment_dir = self.artifacts.experiment_dir(experiment_id)
        work_dir = experiment_dir / "workers" / tag
        budget = self.config.budget
        profile_dir = None
        if profile_level and self.config.profile:
            # the only place outside its scratch where a worker may write: its own profile artifacts
            profile_dir = experiment_dir / "profile_artifacts"
            profile_dir.mkdir(parents=True, exist_ok=True)
        plan = EvaluationPlan(
            label=role.value, experiment_id=experiment_id, run_id=state.run_id, kernel_path=kernel_path,
            harness_path=self.bundle.harness_path, target=self.worker_target(state), cases=self.inputs.cases,
            repetitions=budget.benchmark_repetitions, work_dir=work_dir,
            log_path=experiment_dir / ("worker.log" if role.names_the_experiment_log else f"worker-{tag}.log"),
            deadline=min(deadline, trio.current_time() + budget.max_candidate_seconds),
            phase_seconds=budget.max_candidate_seconds, isolation=sandbox_for(self.config.isolation, work_dir, profile_dir,
                                  data_limit_bytes=self.config.data_limit_bytes,
                                  phase_seconds=budget.max_candidate_seconds),
            worker_python=self.config.worker_python, benchmark=benchmark,
            profile_request=(self.profile_factory(experiment_id, profile_level, profile_reason, diagnostic)
                             if profile_level else None),
            profile_until=min(deadline, profile_until) if profile_until is not None else deadline,
            profile_seconds=profile_seconds_by_case(state.experiments),
            timing_modes=fixed_modes(self.inputs.cases, state.timing_modes), autotune=self.autotune_setup(),
            launchers=getattr(self.spawner, "launchers", None))
        digest = raw_digest(source) if source is not None else ""
        recorded = self.reusable.pop((experiment_id, tag), None)
        reused = recorded is not None and recorded.label == role.value and bool(digest) \
            and recorded.source_sha256 == digest
        if reused:
            evaluation = recorded.evaluation  # type: ignore[union-attr]
            self.log.event(f"{experiment_id} evaluation={tag} reused: it had finished before the run was resumed")
        else:
            if benchmark:
                await self.refuse_leftovers()
            self.log.progress(f"{experiment_id} evaluating {role.value} ({tag})")
            worker_cache = triton_cache_dir(work_dir)
            given = self.kernel_cache.fill(digest, worker_cache) if digest else 0
            evaluation = await run_evaluation(plan, self.spawner, self.parent_env)
            evaluation.worker.kernel_groups_given = given
            if digest and evaluation.status is EvaluationStatus.OK:  # its process tree has ended
                evaluation.worker.kernel_groups_kept = self.kernel_cache.keep(digest, worker_cache)
            self.finished_workers[str(work_dir)] = f"{experiment_id} {role.value} ({tag})"
            impossible = physics_verdict(evaluation, untouched=False) if benchmark and role is not Role.BASELINE \
                else None
            if impossible is not None:  # the untouched kernel's own is the run's to judge (loop.run_baseline)
                evaluation.status, evaluation.reason = EvaluationStatus.CHEAT_DETECTED, impossible
        write_finished(experiment_dir, FinishedEvaluation(experiment_id=experiment_id, tag=tag, label=role.value,
                                                          source_sha256=digest, evaluation=evaluation))
        for case_id in learn_modes(state.timing_modes, evaluation):
            self.log.event(f"timing_mode case={case_id} mode={state.timing_modes[case_id]} (fixed for the run from "
                           f"{experiment_id} {role.value})")
        self.artifacts.journal("evaluation", experiment_id=experiment_id, label=role.value, tag=tag,
                               status=evaluation.status.value, reason=evaluation.reason,
                               wall_seconds=evaluation.worker.wall_seconds, reused=reused, source_sha256=digest)
        self.check_bundle(state)
        self.check_device(state, evaluation)
        return evaluation

    def autotune_setup(self) -> AutotuneSetup:
        """Every worker of the run pins the untouched kernel's autotune choice and refuses any other autotune
        (sandbox_worker/autotune_guard.py; docs/autotune.md)."""
        record = self.config.autotune
        return AutotuneSetup(mode="pin", pins=record.pins() if record is not None else [])

    def worker_target(self, state: RunState) -> Target:
        """The target as workers get it: the bundle's, or with verdicts in the candidate's process when the
        judge could not take the untouched kernel (worker/verdict_fallback.py)."""
        return worker_target(self.inputs.target, state.verdict_fallback)

    def check_device(self, state: RunState, evaluation: Evaluation) -> None:
        """A run measures on one device: a worker that reports another (a resumed run moved to another
        machine) stops the run instead of comparing numbers from two devices."""
        reported = evaluation.worker.device
        if state.device is None or reported is None or reported == state.device:
            return
        message = (f"the run measured on {state.device!r} but this worker reports {reported!r}; a run continues "
                   "only on the device it started on")
        state.stop(StoppingReason.DEVICE_CHANGED, message)
        raise RunAborted(ExitCode.ERROR, message, StoppingReason.DEVICE_CHANGED)
