"""The optimization loop: freeze, baseline, rounds x candidates, decide, revalidate, commit, report."""

from __future__ import annotations

import os
import secrets
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import trio

from orchestrator.bundle.inputs import FrozenBundle, Inputs, check_frozen, freeze_bundle
from orchestrator.decision.bootstrap import measurement_schedule
from orchestrator.decision.confirmation import confirm_until_decided
from orchestrator.decision.gates import BetweenRunNoise, Verdict, decide, noise_from_history
from orchestrator.providers.base import (
    CandidateProvider,
    Proposal,
    ProposalContext,
    ProposalError,
    ProviderExhausted,
)
from orchestrator.run import profile_step
from orchestrator.run.commit_step import CommitStep
from orchestrator.run.config import RunConfig
from orchestrator.run.ledger import reporting
from orchestrator.run.ledger.artifacts import RunArtifacts, write_json
from orchestrator.run.ledger.live_log import LiveLog
from orchestrator.run.ledger.manifest import run_manifest
from orchestrator.run.profile_step import DIAGNOSTIC_LABEL
from orchestrator.source_digest import normalized_digest, raw_digest
from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import Spawner, SubprocessSpawner
from orchestrator.worker.process_tree import become_subreaper
from protocol.bundle import Case
from protocol.profile import ProfileRequest, resolve_native_profiler
from protocol.results import (
    CandidateMetadata,
    Decision,
    DecisionStatus,
    Evaluation,
    EvaluationStatus,
    ExperimentRecord,
    RunResult,
)
from protocol.worker import IsolationConfig


class RunAborted(Exception):
    """Stops the run with an exit code and one message (bad baseline, tampered bundle, ...)."""

    def __init__(self, exit_code: int, message: str, stopping_reason: str | None = None) -> None:
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


@dataclass
class RunState:
    run_id: str
    started: float
    deadline: float  # trio time
    experiments: list[ExperimentRecord] = field(default_factory=list)
    seen_digests: dict[str, str] = field(default_factory=dict)  # normalized digest -> experiment id
    rounds_without_promotion: int = 0
    # normalized digest -> case id -> medians of every benchmarked run of that source (between-run noise)
    run_medians: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    # path -> sha256 of every source the run wrote and will evaluate again (checked before each worker)
    written_sources: dict[str, str] = field(default_factory=dict)
    stopping_reason: str = "round_budget_exhausted"


class OptimizationRun:
    def __init__(self, config: RunConfig, inputs: Inputs, provider: CandidateProvider, log: LiveLog,
                 artifacts: RunArtifacts, commit_step: CommitStep, spawner: Spawner | None = None,
                 prior_digests: frozenset[str] = frozenset(), prior_evidence: tuple[dict, ...] = ()) -> None:
        self.config = config
        self.inputs = inputs
        self.provider = provider
        self.log = log
        self.artifacts = artifacts
        self.commit_step = commit_step
        self.spawner = spawner or SubprocessSpawner()
        self.schedule = measurement_schedule(config.schedule)
        self.parent_env = dict(os.environ)
        self.bundle: FrozenBundle | None = None
        self.prior_digests = prior_digests
        self.prior_evidence = prior_evidence

    # ---- helpers --------------------------------------------------------------------------------

    def isolation_config(self, work_dir: Path, profile_dir: Path | None) -> IsolationConfig:
        writable = [str(work_dir)] + ([str(profile_dir)] if profile_dir is not None else [])
        return IsolationConfig(mode=self.config.isolation, scratch_dir=str(work_dir), writable_dirs=writable,
                               data_limit_bytes=self.config.data_limit_bytes,
                               cpu_seconds=int(self.config.budget.max_candidate_seconds * 2) + 10)

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
        assert self.bundle is not None
        changed = check_frozen(self.bundle)
        if changed is not None:
            state.stopping_reason = "bundle_tampered"
            raise RunAborted(1, f"frozen bundle file {self.bundle.path(changed)} changed during the run; "
                                "the run cannot be trusted and stops", "bundle_tampered")

    def checked_source(self, state: RunState, kernel_path: Path) -> str | None:
        """The source about to be evaluated. One written earlier in the run (the incumbent, the baseline) must
        still be what was written: a candidate that got past the sandbox must not swap its rival's kernel."""
        try:
            source = kernel_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            source = None
        expected = state.written_sources.get(str(kernel_path))
        if expected is not None and (source is None or raw_digest(source) != expected):
            state.stopping_reason = "bundle_tampered"
            raise RunAborted(1, f"{kernel_path} changed after it was written; the run cannot be trusted and stops",
                             "bundle_tampered")
        return source

    async def evaluate(self, state: RunState, *, label: str, experiment_id: str, kernel_path: Path, tag: str,
                       deadline: float, profile_level: str | None = None, profile_reason: str = "candidate",
                       benchmark: bool = True, diagnostic: bool = False) -> Evaluation:
        if diagnostic and (benchmark or label != DIAGNOSTIC_LABEL):
            raise ValueError("diagnostic-only instrumentation is never benchmarked and never labelled for decisions")
        self.check_bundle(state)
        source = self.checked_source(state, kernel_path)
        assert self.bundle is not None
        experiment_dir = self.artifacts.experiment_dir(experiment_id)
        work_dir = experiment_dir / "workers" / tag
        now = trio.current_time()
        budget = self.config.budget
        profile_dir = None
        if profile_level and self.config.profile:
            # the only place outside its scratch where a worker may write: its own profile artifacts
            profile_dir = experiment_dir / "profile_artifacts"
            profile_dir.mkdir(parents=True, exist_ok=True)
        plan = EvaluationPlan(
            label=label, experiment_id=experiment_id, run_id=state.run_id, kernel_path=kernel_path,
            harness_path=self.bundle.harness_path, target=self.inputs.target, cases=self.inputs.cases,
            repetitions=budget.benchmark_repetitions, work_dir=work_dir,
            log_path=experiment_dir / ("worker.log" if label in ("candidate", "baseline", "final") else f"worker-{tag}.log"),
            deadline=min(deadline, now + budget.max_candidate_seconds), phase_seconds=budget.max_candidate_seconds,
            isolation=self.isolation_config(work_dir, profile_dir), worker_python=self.config.worker_python, benchmark=benchmark,
            profile_request=(self.profile_factory(experiment_id, profile_level, profile_reason, diagnostic)
                             if profile_level else None))
        self.log.progress(f"{experiment_id} evaluating {label} ({tag})")
        evaluation = await run_evaluation(plan, self.spawner, self.parent_env)
        if evaluation.status is EvaluationStatus.OK and benchmark and source is not None:
            per_case = state.run_medians.setdefault(normalized_digest(source), {})
            for measured in evaluation.cases:
                if measured.stats is not None:
                    per_case.setdefault(measured.case_id, []).append(measured.stats.median)
        self.artifacts.journal("evaluation", experiment_id=experiment_id, label=label, tag=tag,
                               status=evaluation.status.value, reason=evaluation.reason,
                               wall_seconds=evaluation.worker.wall_seconds)
        self.check_bundle(state)
        return evaluation

    # ---- phases ---------------------------------------------------------------------------------

    async def run(self) -> RunResult:
        config = self.config
        budget = config.budget
        become_subreaper()
        state = RunState(run_id=uuid.uuid4().hex[:12], started=time.monotonic(),
                         deadline=trio.current_time() + budget.max_total_seconds)
        self.bundle = freeze_bundle(self.inputs, self.artifacts.root)
        self.match_validated_files()
        self.write_manifest(state)
        self.log.event(f"bundle frozen dir={str(self.bundle.directory)!r} files={len(self.bundle.files)} "
                       + " ".join(f"{name}={digest[:12]}" for name, digest in sorted(self.bundle.files.items())))
        self.commit_step.prepare(self.inputs.kernel_source)

        baseline = await self.run_baseline(state)
        incumbent = Incumbent("baseline", self.inputs.kernel_source, self.artifacts.root / "experiments/baseline/kernel.py",
                              baseline)
        reserve = min(budget.max_total_seconds * 0.25, 3 * baseline.worker.wall_seconds + 5.0)
        loop_deadline = state.deadline - reserve
        try:
            incumbent = await self.run_rounds(state, incumbent, loop_deadline)
        finally:
            await self.provider.aclose()
        final, winner = await self.revalidate(state, baseline, incumbent)
        return self.finish(state, baseline, final, winner)

    FROZEN_NAMES = {"harness": "harness.py", "cases": "cases.json", "target": "target.json", "kernel": "kernel.py",
                    "budget": "budget.json", "reference_kernel": "reference_kernel.py"}

    def match_validated_files(self) -> None:
        """The frozen copy must be byte-identical to what validation (lock or built-in) checked: a file
        edited between the preflight and the freeze would otherwise run unvalidated."""
        assert self.bundle is not None
        validated = (self.config.extra.get("bundle_lock") or {}).get("files") or {}
        for role, digest in validated.items():
            name = self.FROZEN_NAMES.get(role)
            if name and self.bundle.files.get(name) not in (None, digest):
                raise RunAborted(1, f"{self.bundle.sources[name]} changed between validation and the bundle freeze; "
                                    "validate again", "bundle_tampered")

    def write_manifest(self, state: RunState) -> None:
        assert self.bundle is not None
        write_json(self.artifacts.root / "run.json", run_manifest(self.config, self.inputs, self.bundle, state.run_id))

    async def run_baseline(self, state: RunState) -> Evaluation:
        source_path = self.artifacts.write_source("baseline", self.inputs.kernel_source)
        state.written_sources[str(source_path)] = raw_digest(self.inputs.kernel_source)
        self.log.event(f"baseline status=evaluating source={str(source_path)!r}")
        evaluation = await self.evaluate(state, label="baseline", experiment_id="baseline", kernel_path=source_path,
                                         tag="baseline", deadline=state.deadline, profile_level="deep",
                                         profile_reason="baseline")
        record = ExperimentRecord(experiment_id="baseline", source_sha256=raw_digest(self.inputs.kernel_source),
                                  normalized_sha256=normalized_digest(self.inputs.kernel_source),
                                  source_path=str(source_path), evaluations=[evaluation],
                                  decision=Decision(status=DecisionStatus.BASELINE, reason="baseline"),
                                  wall_seconds=evaluation.worker.wall_seconds)
        state.experiments.append(record)
        state.seen_digests[record.normalized_sha256] = "baseline"
        write_json(self.artifacts.experiment_dir("baseline") / "result.json", record)
        write_json(self.artifacts.root / "baseline_profile.json", reporting.profiles_by_case(evaluation))
        self.log.event(reporting.evaluation_line("baseline", "baseline", evaluation))
        if evaluation.status is not EvaluationStatus.OK:
            raise RunAborted(1, f"baseline kernel failed: {evaluation.status.value}: {evaluation.reason}; "
                                f"fix the kernel or the bundle (worker log: {evaluation.worker.log_path})")
        self.config.extra["device"] = evaluation.worker.device
        self.config.extra["isolation_worker"] = evaluation.worker.isolation
        self.write_manifest(state)
        await profile_step.diagnostic_instrumentation(self, state, "baseline", source_path, state.deadline)
        return evaluation

    def context_for(self, state: RunState, incumbent: Incumbent, experiment_id: str, round_index: int, slot: int,
                    baseline: Evaluation, deadline: float) -> ProposalContext:
        reference = self.inputs.reference_kernel_source
        return ProposalContext(
            experiment_id=experiment_id, round_index=round_index, slot_index=slot,
            kernel_name=self.inputs.kernel_path.name, incumbent_id=incumbent.experiment_id,
            incumbent_source=incumbent.source, incumbent_evaluation=incumbent.evaluation,
            baseline_evaluation=baseline, cases=tuple(self.inputs.cases), target=self.inputs.target,
            history=tuple(state.experiments), excluded_digests=frozenset(state.seen_digests) | self.prior_digests,
            reference_kernel_excerpt=reference[:4000] if reference else None, prior_evidence=self.prior_evidence,
            workspace_root=self.artifacts.root / "provider_workspaces",
            deadline_seconds=max(1.0, min(self.config.budget.max_candidate_seconds, deadline - trio.current_time())))

    async def propose_round(self, state: RunState, incumbent: Incumbent, round_index: int,
                            baseline: Evaluation, deadline: float) -> list[tuple[str, int, Proposal | Exception]]:
        slots = range(self.config.budget.candidates_per_round)
        ids = [f"r{round_index:03d}-c{slot:03d}" for slot in slots]
        results: dict[int, Proposal | Exception] = {}

        async def one(slot: int) -> None:
            context = self.context_for(state, incumbent, ids[slot], round_index, slot, baseline, deadline)
            self.log.event(f"{ids[slot]} status=generating provider={self.provider.name}")
            with trio.move_on_at(deadline) as scope:
                try:
                    results[slot] = await self.provider.propose(context)
                except (ProposalError, ProviderExhausted) as exc:
                    results[slot] = exc
            if scope.cancelled_caught:
                results[slot] = ProposalError("provider did not answer before the run's deadline")

        if self.provider.concurrent:
            async with trio.open_nursery() as nursery:
                for slot in slots:
                    nursery.start_soon(one, slot)
        else:
            for slot in slots:
                await one(slot)
                if isinstance(results[slot], ProviderExhausted):
                    break
        return [(ids[slot], slot, results[slot]) for slot in sorted(results)]

    async def run_rounds(self, state: RunState, incumbent: Incumbent, deadline: float) -> Incumbent:
        baseline = state.experiments[0].evaluations[0]
        for round_index in range(1, self.config.budget.max_rounds + 1):
            if not self.candidate_fits(state, deadline):
                return incumbent
            promoted_this_round = False
            proposals = await self.propose_round(state, incumbent, round_index, baseline, deadline)
            for experiment_id, slot, proposal in proposals:
                if isinstance(proposal, ProviderExhausted):
                    self.log.event(f"{experiment_id} status=provider_exhausted reason={str(proposal)!r}")
                    state.stopping_reason = "provider_exhausted"
                    return incumbent
                if not self.candidate_fits(state, deadline):
                    return incumbent
                record, promoted = await self.run_candidate(state, incumbent, experiment_id, round_index, slot,
                                                            proposal, deadline)
                if promoted is not None:
                    incumbent = promoted
                    promoted_this_round = True
                    if not await self.checkpoint(state, record, incumbent):
                        return incumbent
            state.rounds_without_promotion = 0 if promoted_this_round else state.rounds_without_promotion + 1
        state.stopping_reason = "round_budget_exhausted"
        return incumbent

    def candidate_fits(self, state: RunState, deadline: float) -> bool:
        """Is there time for one more candidate's workers? A candidate cut off by the deadline halfway
        through its A/B/A runs decides nothing and only costs time, so the run stops before it instead.
        The estimate is the last measured candidate's worker time (the baseline's, with its deep profile,
        says little about a candidate's), so the first candidate always starts."""
        left = deadline - trio.current_time()
        measured = next((e for e in reversed(state.experiments)
                         if e.experiment_id != "baseline" and e.evaluations), None)
        expected = sum(e.worker.wall_seconds for e in measured.evaluations) if measured else 0.0
        if left > 0 and left >= expected:
            return True
        state.stopping_reason = "time_budget_exhausted"
        self.log.event(f"run status=stopping reason='time budget: the next candidate needs about {expected:.0f} s "
                       f"of workers, {max(left, 0.0):.0f} s left before revalidation'")
        return False

    async def run_candidate(self, state: RunState, incumbent: Incumbent, experiment_id: str, round_index: int,
                            slot: int, proposal: Proposal | Exception, deadline: float
                            ) -> tuple[ExperimentRecord, Incumbent | None]:
        started = time.monotonic()
        record = ExperimentRecord(experiment_id=experiment_id, round_index=round_index, slot_index=slot,
                                  parent_id=incumbent.experiment_id)
        if isinstance(proposal, Exception):
            self.artifacts.write_source(experiment_id, "")
            record.decision = Decision(status=DecisionStatus.FAILED, reason=f"proposal failed: {proposal}")
            self.log.event(reporting.decision_line(experiment_id, record))
            return self.record(state, record, started), None
        record.metadata = proposal.metadata
        self.log.event(reporting.proposal_line(experiment_id, proposal.metadata))
        source_path = self.artifacts.write_source(experiment_id, proposal.source)
        state.written_sources[str(source_path)] = raw_digest(proposal.source)
        incremental, cumulative = self.artifacts.write_patches(experiment_id, proposal.source, incumbent.experiment_id,
                                                               incumbent.source, self.inputs.kernel_source)
        record.source_path, record.incremental_patch_path = str(source_path), str(incremental)
        record.cumulative_patch_path = str(cumulative)
        record.source_sha256, record.normalized_sha256 = raw_digest(proposal.source), normalized_digest(proposal.source)
        self.log.event(f"{experiment_id} status=artifacts source={str(source_path)!r} "
                       f"incremental_patch={str(incremental)!r} cumulative_patch={str(cumulative)!r}")
        duplicate_of = state.seen_digests.get(record.normalized_sha256) or (
            "a prior run" if record.normalized_sha256 in self.prior_digests else None)
        if duplicate_of:
            record.decision = Decision(status=DecisionStatus.DUPLICATE, reason=f"duplicate of {duplicate_of}")
            self.log.event(reporting.decision_line(experiment_id, record))
            return self.record(state, record, started), None
        state.seen_digests[record.normalized_sha256] = experiment_id

        evaluations, candidate = await self.side_by_side(
            state, experiment_id, source_path, incumbent.kernel_path, deadline=deadline, label="candidate",
            profile_level="summary")
        test_seed = secrets.randbelow(2**31)
        verdict, noise = await self.judge(state, experiment_id, evaluations, source_path, incumbent.kernel_path,
                                          deadline=deadline, label="candidate", test_seed=test_seed)
        record.evaluations = evaluations
        if self.config.profile and candidate.status is EvaluationStatus.OK:
            veto = await profile_step.profile_evidence(self, state, record, candidate, incumbent, verdict, deadline)
            if veto is not None:
                verdict = self.verdict(evaluations, "candidate", test_seed, noise, profile_veto=veto)
        self.apply_verdict(record, verdict)
        if record.statistics:
            record.statistics["between_run_noise"] = noise.as_dict()
        self.log.event(reporting.decision_line(experiment_id, record))
        self.record(state, record, started)
        if record.decision and record.decision.status is DecisionStatus.PROMOTED:
            return record, Incumbent(experiment_id, proposal.source, source_path, candidate)
        return record, None

    async def side_by_side(self, state: RunState, experiment_id: str, candidate_path: Path, incumbent_path: Path, *,
                           deadline: float, label: str, profile_level: str | None, schedule: list[str] | None = None,
                           first_index: int = 0) -> tuple[list[Evaluation], Evaluation]:
        """Measure candidate and incumbent in fresh workers in the `--schedule` order (A/B/A by default), so
        clock and thermal drift hit both; the incumbent runs are skipped once the candidate has failed."""
        evaluations: list[Evaluation] = []
        candidate: Evaluation | None = None
        for index, role in enumerate(schedule or self.schedule, start=first_index):
            if role == "candidate":
                candidate = await self.evaluate(state, label=label, experiment_id=experiment_id,
                                                kernel_path=candidate_path, tag=f"{index}-{label}", deadline=deadline,
                                                profile_level=profile_level, profile_reason=label)
                evaluations.append(candidate)
                self.log.event(reporting.evaluation_line(experiment_id, label, candidate))
                if candidate.status is not EvaluationStatus.OK:
                    break
            else:
                evaluations.append(await self.evaluate(state, label="incumbent", experiment_id=experiment_id,
                                                       kernel_path=incumbent_path, tag=f"{index}-incumbent",
                                                       deadline=deadline))
        assert candidate is not None  # measurement_schedule guarantees a candidate slot
        return evaluations, candidate

    def noise(self, state: RunState) -> BetweenRunNoise:
        """Between-run noise learnt from every source measured more than once so far in this run."""
        groups: dict[str, list[list[float]]] = {}
        for per_case in state.run_medians.values():
            for case_id, medians in per_case.items():
                groups.setdefault(case_id, []).append(medians)
        return noise_from_history(groups, confidence=self.config.confidence)

    def verdict(self, evaluations: list[Evaluation], label: str, test_seed: int,
                noise: BetweenRunNoise, profile_veto: str | None = None) -> Verdict:
        return decide(self.inputs.cases, [e for e in evaluations if e.label == label],
                      [e for e in evaluations if e.label == "incumbent"], self.config.budget,
                      profile_veto=profile_veto, test_seed=test_seed, confidence=self.config.confidence, noise=noise)

    async def judge(self, state: RunState, experiment_id: str, evaluations: list[Evaluation], candidate_path: Path,
                    incumbent_path: Path, *, deadline: float, label: str,
                    test_seed: int) -> tuple[Verdict, BetweenRunNoise]:
        """Decide; while only the noise gate fails, measure another candidate/incumbent pair (at most
        `--confirm-runs` pairs, each only if two more workers fit before the deadline). Appends the extra
        evaluations to `evaluations`."""
        noise = self.noise(state)
        verdict = self.verdict(evaluations, label, test_seed, noise)

        async def measure_pair(pair: int) -> bool:
            self.log.event(f"{experiment_id} status=confirming pair={pair}/{self.config.confirm_pairs} "
                           f"reason={verdict.decision.reason!r}")
            more, _ = await self.side_by_side(state, experiment_id, candidate_path, incumbent_path, deadline=deadline,
                                              label=label, profile_level=None, schedule=["candidate", "incumbent"],
                                              first_index=len(evaluations))
            evaluations.extend(more)
            return all(e.status is EvaluationStatus.OK for e in more)

        def decide_again() -> Verdict:
            nonlocal noise, verdict
            noise = self.noise(state)
            verdict = self.verdict(evaluations, label, test_seed, noise)
            return verdict

        verdict, _pairs = await confirm_until_decided(
            verdict, max_pairs=self.config.confirm_pairs, measure_pair=measure_pair, decide_again=decide_again,
            can_afford_pair=lambda: deadline - trio.current_time() >= 2 * self.worker_seconds(evaluations),
            on_skip=lambda why: self.log.event(f"{experiment_id} status=confirming skipped: {why}"))
        return verdict, noise

    @staticmethod
    def worker_seconds(evaluations: list[Evaluation]) -> float:
        """The longest worker wall time so far: what one more run is expected to cost."""
        return max((e.worker.wall_seconds or 0.0 for e in evaluations), default=0.0)

    @staticmethod
    def apply_verdict(record: ExperimentRecord, verdict: Verdict) -> None:
        record.decision = verdict.decision
        record.comparisons = verdict.comparisons
        record.aggregate_speedup = verdict.aggregate_speedup
        if verdict.test is not None:
            record.statistics = verdict.test.model_dump(mode="json")

    def record(self, state: RunState, record: ExperimentRecord, started: float) -> ExperimentRecord:
        record.wall_seconds = time.monotonic() - started
        state.experiments.append(record)
        write_json(self.artifacts.experiment_dir(record.experiment_id) / "result.json", record)
        write_json(self.artifacts.root / "experiments.json", state.experiments)
        self.artifacts.journal("experiment", experiment_id=record.experiment_id,
                               decision=record.decision.model_dump(mode="json") if record.decision else None,
                               aggregate_speedup=record.aggregate_speedup)
        return record

    async def checkpoint(self, state: RunState, record: ExperimentRecord, incumbent: Incumbent) -> bool:
        """Commit a promotion before the next candidate; False stops the run (commit failed)."""
        ok = await self.commit_step.checkpoint(state, record, incumbent.source, self)
        if not ok:
            state.stopping_reason = "promotion_commit_failed"
        return ok

    async def revalidate(self, state: RunState, baseline: Evaluation,
                         incumbent: Incumbent) -> tuple[Evaluation | None, Incumbent | None]:
        """Re-measure the finalist in fresh workers next to fresh baseline runs; None winner = rejected."""
        if incumbent.experiment_id == "baseline":
            return None, None
        self.log.event(f"final status=revalidating winner={incumbent.experiment_id}")
        final_path = self.artifacts.write_source("final", incumbent.source)
        state.written_sources[str(final_path)] = raw_digest(incumbent.source)
        evaluations, final = await self.side_by_side(
            state, "final", final_path, self.artifacts.root / "experiments/baseline/kernel.py", deadline=state.deadline,
            label="final", profile_level="deep")
        verdict, noise = await self.judge(state, "final", evaluations, final_path,
                                          self.artifacts.root / "experiments/baseline/kernel.py",
                                          deadline=state.deadline, label="final", test_seed=secrets.randbelow(2**31))
        record = ExperimentRecord(experiment_id="final", parent_id=incumbent.experiment_id,
                                  source_sha256=raw_digest(incumbent.source),
                                  normalized_sha256=normalized_digest(incumbent.source), source_path=str(final_path),
                                  metadata=next((e.metadata for e in state.experiments
                                                 if e.experiment_id == incumbent.experiment_id), CandidateMetadata()),
                                  evaluations=evaluations)
        self.apply_verdict(record, verdict)
        if record.statistics:
            record.statistics["between_run_noise"] = noise.as_dict()
        accepted = verdict.decision.status is DecisionStatus.PROMOTED
        record.decision = Decision(status=DecisionStatus.REVALIDATED if accepted else DecisionStatus.REJECTED,
                                   reason=verdict.decision.reason, gates=verdict.decision.gates)
        state.experiments.append(record)
        write_json(self.artifacts.experiment_dir("final") / "result.json", record)
        write_json(self.artifacts.root / "experiments.json", state.experiments)
        self.log.event(reporting.decision_line("final", record, status="revalidated" if accepted else "baseline"))
        if not accepted:
            state.stopping_reason = "finalist_revalidation_failed"
            if not await self.commit_step.rollback(state, record.decision.reason):
                state.stopping_reason = "rollback_commit_failed"
            return final, None
        await self.commit_step.finalize(state, record)
        await profile_step.diagnostic_instrumentation(self, state, "final", final_path, state.deadline)
        return final, incumbent

    def finish(self, state: RunState, baseline: Evaluation, final: Evaluation | None,
               winner: Incumbent | None) -> RunResult:
        source = winner.source if winner else self.inputs.kernel_source
        best_path = self.artifacts.root / "best_kernel.py"
        best_path.write_text(source, encoding="utf-8")
        best = final if winner else baseline
        write_json(self.artifacts.root / "best_profile.json", reporting.profiles_by_case(best))
        exit_code = 0 if winner else 2
        if state.stopping_reason in ("promotion_commit_failed", "rollback_commit_failed") or self.commit_step.failed:
            exit_code = 3
        final_record = next((e for e in state.experiments if e.experiment_id == "final"), None)
        result = reporting.build_result(
            config=self.config, inputs=self.inputs, state_experiments=state.experiments, baseline=baseline,
            final=final if winner else None, final_record=final_record if winner else None,
            winner_id=winner.experiment_id if winner else "baseline", stopping_reason=state.stopping_reason,
            exit_code=exit_code, commits=self.commit_step.records, commit_summary=self.commit_step.summary(),
            best_path=best_path, wall_seconds=time.monotonic() - state.started, output_dir=self.artifacts.root)
        return result
