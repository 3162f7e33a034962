"""The optimization loop as phases: preflight, freeze, baseline, rounds x candidates, revalidate, finish.
Long because: each phase has its resumed form next to it (`--resume`, docs/resume.md), sharing one RunState; the
end revalidates next-best finalists after a failed one (run/finalists.py) and a round re-asks for refused proposals.

Each phase is a method; the work inside a phase lives elsewhere: `Evaluator` runs workers, `SideBySide`
measures and judges, `CommitStep` commits, `profile_step` gathers profile evidence, `orchestrator.decision`
decides, and the ledger (`orchestrator/ledger/`) writes every record.
"""

from __future__ import annotations

import os
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio

from orchestrator.bundle.inputs import FROZEN_NAME_BY_ROLE, Inputs, freeze_bundle
from orchestrator.compile_ahead.ahead import compile_target_for
from orchestrator.decision.evidence import profiles_not_taken
from orchestrator.decision.physics import device_peaks_line, physics_verdict
from orchestrator.decision.referee import Ruling
from orchestrator.decision.time_budget import (
    candidate_fits,
    expected_candidate_seconds,
    revalidation_fits,
    revalidation_reserve,
    revalidation_seconds,
)
from orchestrator.ledger import reporting
from orchestrator.ledger.artifacts import RunArtifacts, write_json
from orchestrator.ledger.config import RunConfig
from orchestrator.ledger.live_log import LiveLog, quote
from orchestrator.providers.base import (
    CandidateProvider,
    Proposal,
    ProposalContext,
    ProposalError,
    ProviderExhausted,
)
from orchestrator.run import finalists, profile_step, refusals
from orchestrator.run.ahead_step import RoundCompiles, compiled_ahead, compiling_alongside
from orchestrator.run.commit_step import CommitStep
from orchestrator.run.evaluator import Evaluates, Evaluator, MakesEvaluator
from orchestrator.run.first_call_step import winner_first_call
from orchestrator.run.manifest import run_manifest
from orchestrator.run.provider_failures import ProviderFailed, ProviderFailures
from orchestrator.run.resume.providers import resume_provider
from orchestrator.run.resume.rebuild import Resumption, choose_incumbents, incumbent_of
from orchestrator.run.screening import Screener
from orchestrator.run.side_by_side import SideBySide, Source
from orchestrator.run.state import Incumbent, RunAborted, RunState, promoted_incumbent
from orchestrator.source_digest import normalized_digest, raw_digest
from orchestrator.worker import verdict_fallback
from orchestrator.worker.forkserver import make_spawner
from orchestrator.worker.process import Spawner, SubprocessSpawner
from orchestrator.worker.process_tree import become_subreaper
from protocol.bundle import runs_on_gpu
from protocol.outcome import ExitCode, StoppingReason
from protocol.results import (
    CandidateMetadata,
    Decision,
    DecisionStatus,
    Evaluation,
    EvaluationStatus,
    ExperimentRecord,
    FinalistAttempt,
    RefusedProposal,
    RunResult,
    revalidation_id,
)
from protocol.roles import Role

# one slot of a round: its experiment id, the slot, its proposal (or why there is none), what was refused before it
SlotProposal = tuple[str, int, Proposal | Exception, list[RefusedProposal]]


class OptimizationRun:
    def __init__(self, config: RunConfig, inputs: Inputs, provider: CandidateProvider, log: LiveLog,
                 artifacts: RunArtifacts, commit_step: CommitStep, spawner: Spawner | None = None,
                 prior_digests: frozenset[str] = frozenset(), prior_evidence: tuple[dict, ...] = (),
                 resume: Resumption | None = None, make_evaluator: MakesEvaluator = Evaluator,
                 draw_test_seed: Callable[[str], int] = lambda _experiment_id: secrets.randbelow(2**31),
                 preflight: Callable[[Spawner], Awaitable[str | None]] | None = None) -> None:
        self.config = config
        self.inputs = inputs
        self.provider = provider
        self.log = log
        self.artifacts = artifacts
        self.commit_step = commit_step
        self.spawner = spawner
        self.prior_digests = prior_digests
        self.prior_evidence = prior_evidence
        self.make_evaluator = make_evaluator  # a test's fake evaluator returns recorded or synthetic evaluations
        self.draw_test_seed = draw_test_seed  # the bootstrap's seed per experiment (a recorded run's, to replay it)
        # optimize's built-in preflight (orchestrator/preflight/runner.py): given the run's spawner, the line that
        # stops the run or None; not given with --skip-validation or --bundle-lock, nor to a resumed run
        self.preflight = preflight
        self.evaluator: Evaluates | None = None
        self.side_by_side: SideBySide | None = None
        self.screener: Screener | None = None  # set once the rounds start (the tuner screens families)
        self.resume = resume  # a dead run's records to go on from (orchestrator/run/resume/)
        # what the provider raises is that proposal's failure, written, logged and counted
        self.provider_failures = ProviderFailures(provider.name, artifacts, log)
        self.finalists: list[FinalistAttempt] = []  # the finalists revalidated, in order (run/finalists.py)
        self.finalists_stop = ""  # why no further finalist was tried after the last failed one

    # ---- phases ---------------------------------------------------------------------------------

    async def run(self) -> RunResult:
        budget = self.config.budget
        become_subreaper()
        if self.resume is not None:
            state = self.resume.state
            state.deadline = trio.current_time() + self.resume.seconds_left
        else:
            state = RunState(run_id=uuid.uuid4().hex[:12], started=time.monotonic(),
                             deadline=trio.current_time() + budget.max_total_seconds)
        if self.spawner is not None or self.config.worker_start == "fresh":
            await self.validate_bundle(self.spawner or SubprocessSpawner())
            return await self.run_phases(state)
        # warm workers: the fork server imports torch and triton once, for the preflight's workers and the run's
        async with make_spawner("forkserver", parent_env=dict(os.environ), scratch=self.artifacts.root / "forkserver",
                                target_environment=self.inputs.target.environment, python=self.config.worker_python,
                                log_path=self.artifacts.root / "forkserver.log", notify=self.log.event,
                                triton_seed=runs_on_gpu(self.inputs.target.backend)) as spawner:
            self.spawner = spawner
            await self.validate_bundle(spawner)
            return await self.run_phases(state)

    async def validate_bundle(self, spawner: Spawner) -> None:
        """The built-in preflight, before anything is measured; a bundle that cannot reject bad candidates stops
        the run (exit 1) with the line that says which check failed."""
        if self.preflight is None or self.resume is not None:
            return
        failure = await self.preflight(spawner)
        if failure is not None:
            raise RunAborted(ExitCode.ERROR, failure)

    async def run_phases(self, state: RunState) -> RunResult:
        budget = self.config.budget
        if self.resume is None:
            self.freeze(state)
            self.commit_step.prepare(self.inputs.kernel_source, state.run_id)
        else:
            self.reopen(state, self.resume)
        recorded_baseline = self.resume.record("baseline") if self.resume else None
        baseline = recorded_baseline.evaluations[0] if recorded_baseline else await self.run_baseline(state)
        state.verdict_fallback = baseline.worker.verdict_fallback  # a resumed run stays where its baseline ran
        incumbent = Incumbent("baseline", self.inputs.kernel_source,
                              self.artifacts.root / "experiments/baseline/kernel.py", baseline)
        loop_deadline = state.deadline - revalidation_reserve(budget.max_total_seconds, baseline)
        ended = self.resume.recorded.last_event("rounds_ended") if self.resume else None
        if ended is None:
            try:
                committed = True
                if self.resume is not None:
                    incumbent = incumbent_of(choose_incumbents(state.experiments, 0).current, incumbent)
                    committed = await self.settle_checkpoint(state, incumbent)
                if committed:
                    incumbent = await self.run_rounds(state, incumbent, baseline, loop_deadline)
            finally:
                await self.close_provider()
            self.artifacts.journal("rounds_ended", incumbent_id=incumbent.experiment_id,
                                   stopping_reason=state.stopping_reason, stopping_detail=state.stopping_detail,
                                   provider_explanation=state.provider_explanation)
        else:
            await self.close_provider()
            state.stop(StoppingReason(ended["stopping_reason"]), ended["stopping_detail"])
            state.provider_explanation = ended.get("provider_explanation")
            incumbent = incumbent_of(next((e for e in state.experiments if e.experiment_id == ended["incumbent_id"]),
                                          None), incumbent)
        final_record, winner = await self.revalidate_finalists(state, incumbent, baseline)
        result = self.finish(state, baseline, final_record, winner)
        if self.config.autotune is not None:  # a kernel that autotunes itself: its choice, first calls before and after
            assert self.evaluator is not None
            result.report.autotune = (await winner_first_call(self.evaluator, state, winner)
                                      if winner is not None else self.config.autotune)
        return result

    def reopen(self, state: RunState, resume: Resumption) -> None:
        """A resumed run works on the frozen bundle the dead run checked, and its commit session as the
        dead run's commits left it."""
        recorded = resume.recorded
        self.evaluator = self.make_evaluator(self.config, self.inputs, recorded.bundle, self.artifacts, self.log,
                                             self.spawner)
        self.evaluator.reusable = dict(resume.reusable)
        self.side_by_side = SideBySide(self.evaluator)
        self.evaluator.check_bundle(state)
        winners = {r.experiment_id: Path(r.source_path).read_text(encoding="utf-8") for r in state.experiments
                   if r.decision is not None and r.decision.status is DecisionStatus.PROMOTED}
        self.commit_step.reopen(self.inputs.kernel_source, state.run_id, recorded.last_event("commit_prepared"),
                                recorded.commits, winners)
        round_index, slot = resume.next_slot
        self.log.event(f"run status=resumed run_id={state.run_id} finished_experiments={len(state.experiments)} "
                       f"next=r{round_index:03d}-c{slot:03d} seconds_left={resume.seconds_left:.0f}")

    async def settle_checkpoint(self, state: RunState, incumbent: Incumbent) -> bool:
        """The promotion a dead run recorded but may not have committed is committed (at most once) before
        the next candidate, as the live loop would have; False stops the rounds (the commit failed)."""
        if incumbent.experiment_id == "baseline" or any(
                r.experiment_id == incumbent.experiment_id for r in self.commit_step.records):
            return True
        record = next(e for e in state.experiments if e.experiment_id == incumbent.experiment_id)
        assert self.evaluator is not None
        if await self.commit_step.checkpoint(state, record, incumbent.source, self.evaluator):
            return True
        state.stop(StoppingReason.PROMOTION_COMMIT_FAILED,
                   reporting.commit_failed_detail(record, self.commit_step.records))
        return False

    def freeze(self, state: RunState) -> None:
        bundle = freeze_bundle(self.inputs, self.artifacts.root)
        self.evaluator = self.make_evaluator(self.config, self.inputs, bundle, self.artifacts, self.log, self.spawner)
        self.side_by_side = SideBySide(self.evaluator)
        # The frozen copy must be byte-identical to what validation (lock or built-in) checked: a file edited
        # between the preflight and the freeze would otherwise run unvalidated.
        validated = (self.config.bundle_lock_summary or {}).get("files") or {}
        for role, digest in validated.items():
            name = FROZEN_NAME_BY_ROLE.get(role)
            if name and bundle.files.get(name) not in (None, digest):
                raise RunAborted(ExitCode.ERROR, f"{bundle.sources[name]} changed between validation and the bundle "
                                                 "freeze; validate again", StoppingReason.BUNDLE_TAMPERED)
        self.write_manifest(state)
        self.log.event(f"bundle frozen dir={str(bundle.directory)!r} files={len(bundle.files)} "
                       + " ".join(f"{name}={digest[:12]}" for name, digest in sorted(bundle.files.items())))
        if self.config.refused_environment:
            self.log.event("target environment refused=" + ",".join(self.config.refused_environment)
                           + " (not passed to workers; listed in run.json)")

    def write_manifest(self, state: RunState) -> None:
        assert self.evaluator is not None
        if self.resume is not None:  # the record of the run stays; only what a re-run baseline saw is added
            recorded = self.resume.recorded.manifest
            isolation = recorded.isolation.model_copy(update={"baseline_worker": state.worker_isolation})
            manifest = recorded.model_copy(update={"device": state.device, "isolation": isolation})
        else:
            manifest = run_manifest(self.config, self.inputs, self.evaluator.bundle, state)
        write_json(self.artifacts.root / "run.json", manifest)

    async def run_baseline(self, state: RunState) -> Evaluation:
        assert self.evaluator is not None
        source_path = self.artifacts.write_source("baseline", self.inputs.kernel_source)
        state.written_sources[str(source_path)] = raw_digest(self.inputs.kernel_source)
        self.log.event(f"baseline status=evaluating source={str(source_path)!r}")

        async def in_candidate_process(reason: str) -> Evaluation:
            state.verdict_fallback = reason  # what the evaluator's workers are given from here on
            return await self.evaluate_baseline(state, source_path, "baseline-candidate-process")

        evaluation, state.verdict_fallback = await verdict_fallback.settle_verdict_process(
            self.inputs.target, await self.evaluate_baseline(state, source_path, "baseline"),
            lambda reason: self.log.event(f"baseline verdict_fallback=candidate reason={quote(reason, 700)}"),
            in_candidate_process)
        evaluation.worker.verdict_fallback = state.verdict_fallback
        impossible = physics_verdict(evaluation, untouched=True)
        if impossible is not None:
            evaluation.status, evaluation.reason = EvaluationStatus.CHEAT_DETECTED, impossible
        record = ExperimentRecord(experiment_id="baseline", source_sha256=raw_digest(self.inputs.kernel_source),
                                  normalized_sha256=normalized_digest(self.inputs.kernel_source),
                                  source_path=str(source_path), evaluations=[evaluation],
                                  decision=Decision(status=DecisionStatus.BASELINE, reason="baseline"),
                                  wall_seconds=evaluation.worker.wall_seconds)
        state.experiments.append(record)
        state.seen_digests[record.normalized_sha256] = "baseline"
        state.run_medians = state.run_medians.with_run(record.normalized_sha256, evaluation)  # the noise's first run
        write_json(self.artifacts.experiment_dir("baseline") / "result.json", record)
        write_json(self.artifacts.root / "experiments.json", state.experiments)  # a resume reuses the baseline
        write_json(self.artifacts.root / "baseline_profile.json", reporting.profiles_by_case(evaluation))
        self.log.event(reporting.evaluation_line("baseline", "baseline", evaluation))
        if evaluation.status is not EvaluationStatus.OK:
            message = (f"baseline kernel failed: {evaluation.status.value}: {evaluation.reason}; "
                       f"fix the kernel or the bundle (worker log: {evaluation.worker.log_path})")
            state.stop(StoppingReason.BASELINE_FAILED, message)
            raise RunAborted(ExitCode.ERROR, message, StoppingReason.BASELINE_FAILED)
        state.device = evaluation.worker.device
        state.worker_isolation = dict(evaluation.worker.isolation)
        state.worker_versions = dict(evaluation.worker.versions)
        self.log.event(reporting.verdict_line(evaluation.worker.verdict_process, state.verdict_fallback))
        self.log.event(f"physics {device_peaks_line(state.device)}")
        self.log.event(profile_step.evidence_line(self.evaluator, state))
        self.write_manifest(state)
        await profile_step.diagnostic_instrumentation(self.evaluator, state, "baseline", source_path, state.deadline)
        return evaluation

    async def evaluate_baseline(self, state: RunState, source_path: Path, tag: str) -> Evaluation:
        assert self.evaluator is not None
        return await self.evaluator.evaluate(state, role=Role.BASELINE, experiment_id="baseline",
                                             kernel_path=source_path, tag=tag, deadline=state.deadline,
                                             profile_level="deep", profile_reason="baseline")

    async def run_rounds(self, state: RunState, incumbent: Incumbent, baseline: Evaluation,
                         deadline: float) -> Incumbent:
        assert self.evaluator is not None
        self.screener = Screener(self.evaluator, state, deadline)
        first_round, first_slot = (1, 0)
        round_start = incumbent
        if self.resume is not None:
            self.screener.count = self.resume.screenings
            first_round, first_slot = self.resume.next_slot
            try:
                resume_provider(self.provider, state.experiments)
            except Exception as exc:  # noqa: BLE001 - the provider's failure, recorded; it proposes afresh
                self.provider_failures.failed("resume", exc)
            round_start = incumbent_of(choose_incumbents(state.experiments, first_round).at_round_start,
                                       Incumbent("baseline", self.inputs.kernel_source,
                                                 self.artifacts.root / "experiments/baseline/kernel.py", baseline))
        for round_index in range(first_round, self.config.budget.max_rounds + 1):
            if not self.next_candidate_fits(state, deadline):
                return incumbent
            start_slot = first_slot if round_index == first_round else 0
            # a resumed round: its proposals see what the round's first proposals saw (incumbent, history)
            proposing_for = round_start if start_slot else incumbent
            promoted_this_round = any(e.round_index == round_index and e.decision is not None
                                      and e.decision.status is DecisionStatus.PROMOTED for e in state.experiments)
            proposals = await self.propose_round(state, proposing_for, round_index, baseline, deadline, start_slot)
            async with compiling_alongside(self.evaluator) as round_compiles:
                written = self.start_round_compiles(round_compiles, state, proposals, deadline)
                incumbent, promoted, stopped = await self.run_round(state, incumbent, round_index, proposals,
                                                                    deadline, round_compiles)
            self.artifacts.remove_unrecorded(written, {e.experiment_id for e in state.experiments})
            if stopped:
                return incumbent
            promoted_this_round = promoted_this_round or promoted
            state.rounds_without_promotion = 0 if promoted_this_round else state.rounds_without_promotion + 1
        state.stop(StoppingReason.ROUND_BUDGET_EXHAUSTED,
                   reporting.round_budget_detail(self.config.budget.max_rounds, state.experiments))
        return incumbent

    async def run_round(self, state: RunState, incumbent: Incumbent, round_index: int,
                        proposals: Sequence[SlotProposal],
                        deadline: float, round_compiles: RoundCompiles) -> tuple[Incumbent, bool, bool]:
        """Each of the round's candidates in slot order: (the incumbent after them, whether one was promoted,
        whether the run stops)."""
        promoted_here = False
        for experiment_id, slot, proposal, refused in proposals:
            if isinstance(proposal, refusals.OnlyRefused):  # no worker: recorded; nothing more is asked for
                await self.run_candidate(state, incumbent, experiment_id, round_index, slot, proposal, deadline,
                                         refused)
                why = (f"the {self.provider.name} provider proposed only what the run already refused "
                       f"({len(refused)} in a row); no more proposals are asked for in this round, the next "
                       "round proposes again")
                self.log.event(f"{experiment_id} status=round_ended reason={quote(why)}")
                continue  # a concurrent provider's other slots were proposed already: they still run
            if isinstance(proposal, ProviderExhausted):
                self.log.event(f"{experiment_id} status=provider_exhausted reason={str(proposal)!r}")
                state.stop(StoppingReason.PROVIDER_EXHAUSTED,
                           str(proposal) or f"the {self.provider.name} provider has no further candidate")
                state.provider_explanation = proposal.explanation_json
                return incumbent, promoted_here, True
            if not self.next_candidate_fits(state, deadline):
                return incumbent, promoted_here, True
            record, promoted = await self.run_candidate(state, incumbent, experiment_id, round_index, slot,
                                                        proposal, deadline, refused, round_compiles=round_compiles)
            if isinstance(proposal, ProviderFailed) and self.provider_failures.exhausted:
                detail = self.provider_failures.exhausted_detail()
                self.log.event(f"{experiment_id} status=provider_exhausted reason={quote(detail, 600)}")
                state.stop(StoppingReason.PROVIDER_EXHAUSTED, detail)
                return incumbent, promoted_here, True
            if promoted is not None:
                incumbent = promoted
                promoted_here = True
                if not await self.commit_step.checkpoint(state, record, incumbent.source, self.evaluator):
                    state.stop(StoppingReason.PROMOTION_COMMIT_FAILED,
                               reporting.commit_failed_detail(record, self.commit_step.records))
                    return incumbent, promoted_here, True
        return incumbent, promoted_here, False

    def start_round_compiles(self, compiles: RoundCompiles, state: RunState,
                             proposals: Sequence[SlotProposal],
                             deadline: float) -> list[str]:
        """Every new source the round proposed, compiled ahead from now on, side by side (ahead_step.py), from
        its experiment's kernel.py, written now; the experiments written. Nothing with `--no-overlap-compile-ahead`
        or where the target takes no compile ahead. A duplicate, or a source a screening compiled already, is not
        compiled."""
        if not self.config.overlap_compile_ahead or compile_target_for(self.inputs.target) is None:
            return []
        written: list[str] = []
        known = set(state.seen_digests) | set(self.prior_digests)
        for experiment_id, _slot, proposal, _refused in proposals:
            if not isinstance(proposal, Proposal) or raw_digest(proposal.source) in state.compiled_ahead:
                continue
            digest = normalized_digest(proposal.source)
            if digest in known:
                continue
            known.add(digest)
            path = self.artifacts.write_source(experiment_id, proposal.source)  # as its turn writes it again
            written.append(experiment_id)
            compiles.start(experiment_id, proposal.source, path, deadline - trio.current_time(),
                           device_name=state.device)
        return written

    def next_candidate_fits(self, state: RunState, deadline: float) -> bool:
        left = deadline - trio.current_time()
        assert self.side_by_side is not None
        expected = expected_candidate_seconds(state.experiments, self.side_by_side.referee.rules.full_decision_runs)
        if candidate_fits(left, expected):
            return True
        state.stop(StoppingReason.TIME_BUDGET_EXHAUSTED,
                   reporting.time_budget_detail(expected, left, self.config.budget.max_total_seconds))
        self.log.event(f"run status=stopping reason='time budget: the next candidate needs about {expected:.0f} s "
                       f"of workers, {max(left, 0.0):.0f} s left before revalidation'")
        return False

    # ---- one round: proposals, then each candidate ------------------------------------------------

    def context_for(self, state: RunState, incumbent: Incumbent, experiment_id: str, round_index: int, slot: int,
                    baseline: Evaluation, deadline: float, refused: Sequence[RefusedProposal] = ()) -> ProposalContext:
        reference = self.inputs.reference_kernel_source
        # what the round knew when it proposed: the records of earlier rounds (the same in a resumed round), and
        # what was refused of this slot's own proposals so far
        history = tuple(e for e in state.experiments if e.round_index < round_index)
        known = {e.experiment_id for e in history}
        excluded = (frozenset(d for d, eid in state.seen_digests.items() if eid in known) | self.prior_digests
                    | frozenset(refusals.refusals_in(history)) | {r.normalized_sha256 for r in refused})
        return ProposalContext(
            experiment_id=experiment_id, round_index=round_index, slot_index=slot,
            kernel_name=self.inputs.kernel_path.name, incumbent_id=incumbent.experiment_id,
            incumbent_source=incumbent.source, incumbent_evaluation=incumbent.evaluation,
            baseline_evaluation=baseline, cases=tuple(self.inputs.cases), target=self.inputs.target,
            history=history, excluded_digests=excluded,
            reference_kernel_excerpt=reference[:4000] if reference else None, prior_evidence=self.prior_evidence,
            workspace_root=self.artifacts.root / "provider_workspaces",
            deadline_seconds=max(1.0, min(self.config.budget.max_candidate_seconds, deadline - trio.current_time())),
            screener=self.screener, infeasible=self.screener.store if self.screener is not None else None,
            min_speedup=self.config.budget.min_speedup,
            max_case_regression=self.config.budget.max_case_regression,
            refused=tuple(refused),
            autotune_choices=tuple(self.config.autotune.choices) if self.config.autotune else ())

    async def propose_round(self, state: RunState, incumbent: Incumbent, round_index: int, baseline: Evaluation,
                            deadline: float, first_slot: int = 0
                            ) -> list[SlotProposal]:
        """Each slot's proposal (or why there is none), with the proposals refused for it before any worker
        because the run had refused what they propose (run/refusals.py): the provider is asked again after each,
        up to `MAX_REFUSED_IN_A_ROW`; a slot that got only those ends the round."""
        ids = [f"r{round_index:03d}-c{slot:03d}" for slot in range(self.config.budget.candidates_per_round)]
        slots = range(first_slot, self.config.budget.candidates_per_round)
        results: dict[int, Proposal | Exception] = {}
        refused: dict[int, list[RefusedProposal]] = {slot: [] for slot in slots}

        async def ask(slot: int) -> Proposal | Exception:
            context = self.context_for(state, incumbent, ids[slot], round_index, slot, baseline, deadline,
                                       refused[slot])
            self.log.event(f"{ids[slot]} status=generating provider={self.provider.name}")
            with trio.move_on_at(deadline) as scope:
                try:
                    proposal = await self.provider.propose(context)
                    self.provider_failures.succeeded()
                    return proposal
                except (ProposalError, ProviderExhausted) as exc:
                    return exc
                except Exception as exc:  # noqa: BLE001 - whatever else it raises fails this proposal only
                    return self.provider_failures.failed(ids[slot], exc)
            assert scope.cancelled_caught
            return ProposalError("provider did not answer before the run's deadline")

        async def one(slot: int) -> None:
            while True:
                results[slot] = await ask(slot)
                proposal = results[slot]
                why = refusals.known_refusal(state.refused, self.screener.store if self.screener else None,
                                             proposal, self.inputs.target) if isinstance(proposal, Proposal) else None
                if why is None:
                    return
                refused[slot].append(self.refuse(ids[slot], proposal, why, len(refused[slot]) + 1))
                if len(refused[slot]) >= refusals.MAX_REFUSED_IN_A_ROW:
                    results[slot] = refusals.OnlyRefused(refused[slot])
                    return

        if self.provider.concurrent:
            async with trio.open_nursery() as nursery:
                for slot in slots:
                    nursery.start_soon(one, slot)
        else:
            for slot in slots:
                await one(slot)
                if isinstance(results[slot], (ProviderExhausted, refusals.OnlyRefused)) \
                        or self.provider_failures.exhausted:
                    break
        return [(ids[slot], slot, results[slot], refused[slot]) for slot in sorted(results)]

    def refuse(self, experiment_id: str, proposal: Proposal, why: str, count: int) -> RefusedProposal:
        """A proposal refused before any worker: its source kept beside the slot's, said in the live log and
        the journal."""
        path = self.artifacts.experiment_dir(experiment_id) / f"refused-{count}.py"
        path.write_text(proposal.source, encoding="utf-8")
        refused = RefusedProposal(normalized_sha256=normalized_digest(proposal.source), reason=why,
                                  source_path=str(path), change=proposal.metadata.change)
        self.log.event(f"{experiment_id} status=proposal_refused attempt={count}/{refusals.MAX_REFUSED_IN_A_ROW} "
                       f"source={str(path)!r} reason={quote(f'already refused: {why}', 400)} (no worker; the "
                       f"{self.provider.name} provider is asked again)")
        self.artifacts.journal("proposal_refused", experiment_id=experiment_id, attempt=count,
                               normalized_sha256=refused.normalized_sha256, reason=why, source_path=str(path))
        return refused

    async def run_candidate(self, state: RunState, incumbent: Incumbent, experiment_id: str, round_index: int,
                            slot: int, proposal: Proposal | Exception, deadline: float,
                            refused: Sequence[RefusedProposal] = (), *, round_compiles: RoundCompiles | None = None
                            ) -> tuple[ExperimentRecord, Incumbent | None]:
        assert self.evaluator is not None and self.side_by_side is not None
        started = time.monotonic()
        record = ExperimentRecord(experiment_id=experiment_id, round_index=round_index, slot_index=slot,
                                  parent_id=incumbent.experiment_id, refused_proposals=list(refused))
        if isinstance(proposal, refusals.OnlyRefused):
            self.artifacts.write_source(experiment_id, "")
            record.decision = Decision(status=DecisionStatus.DUPLICATE,
                                       reason=f"no proposal: {proposal}; the last: {refused[-1].reason}")
            self.log.event(reporting.decision_line(experiment_id, record))
            return self.record(state, record, started), None
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
        ahead = await compiled_ahead(self.evaluator, self.screener.store if self.screener else None, experiment_id,
                                     proposal.source, source_path, deadline - trio.current_time(),
                                     screened_in=state.compiled_ahead.get(raw_digest(proposal.source)),
                                     device_name=state.device, round_compiles=round_compiles)
        if ahead is not None:  # over the device's limits: no GPU worker spent, and never proposed again
            record.evaluations = [ahead]
            record.decision = Decision(status=DecisionStatus.REJECTED, reason=f"build_failed: {ahead.reason}")
            self.log.event(reporting.decision_line(experiment_id, record))
            state.refused.setdefault(record.normalized_sha256, refusals.refusal_of(record) or ahead.reason)
            return self.record(state, record, started), None

        ruling = await self.side_by_side.decide(
            state, experiment_id, role=Role.CANDIDATE, candidate=Source(source_path, record.normalized_sha256),
            incumbent=Source(incumbent.kernel_path, normalized_digest(incumbent.source)), deadline=deadline,
            test_seed=self.draw_test_seed(experiment_id), evidence=profile_step.evidence(self.evaluator, state,
                                                                              incumbent.evaluation))
        record.evaluations = ruling.evaluations
        apply_ruling(record, ruling)
        for line in record.profiles_not_taken:
            self.log.event(f"{experiment_id} profile_not_taken=budget detail={quote(line)}")
        self.log.event(reporting.decision_line(experiment_id, record))
        why = refusals.refusal_of(record)  # a source that failed to build is never a candidate again
        if why is not None:
            state.refused.setdefault(record.normalized_sha256, why)
        self.record(state, record, started)
        if record.decision and record.decision.status is DecisionStatus.PROMOTED:
            return record, promoted_incumbent(record, proposal.source, source_path)
        return record, None

    def record(self, state: RunState, record: ExperimentRecord, started: float) -> ExperimentRecord:
        record.wall_seconds = time.monotonic() - started
        state.experiments.append(record)
        write_json(self.artifacts.experiment_dir(record.experiment_id) / "result.json", record)
        write_json(self.artifacts.root / "experiments.json", state.experiments)
        self.artifacts.journal("experiment", experiment_id=record.experiment_id,
                               decision=record.decision.model_dump(mode="json") if record.decision else None,
                               aggregate_speedup=record.aggregate_speedup)
        return record

    async def close_provider(self) -> None:
        try:
            await self.provider.aclose()
        except Exception as exc:  # noqa: BLE001 - recorded; closing is the provider's last call
            self.provider_failures.failed("aclose", exc)

    # ---- the end: revalidation and the result -----------------------------------------------------

    async def revalidate_finalists(self, state: RunState, incumbent: Incumbent, baseline: Evaluation
                                   ) -> tuple[ExperimentRecord | None, Incumbent | None]:
        """Revalidate the finalist; after a failed revalidation, the next-best earlier promotion while one more
        revalidation fits in the time left (run/finalists.py), and so on; then keep or roll back the commits.
        A resumed run takes every revalidation its records hold and measures only those they do not."""
        if incumbent.experiment_id == "baseline":
            return None, None
        rounds = (state.stopping_reason, state.stopping_detail)
        attempts: list[ExperimentRecord] = []
        measured: set[str] = set()
        finalist: Incumbent | None = incumbent
        while finalist is not None:
            revalidation = revalidation_id(len(attempts) + 1)
            record = self.resume.record(revalidation) if self.resume else None
            if record is None:
                record = await self.revalidate(state, finalist, revalidation)
                measured.add(revalidation)
            attempts.append(record)
            if record.decision is not None and record.decision.status is DecisionStatus.REVALIDATED:
                break
            finalist = self.next_finalist(state, attempts, baseline)
        self.finalists = [finalists.attempt_of(record) for record in attempts]
        return await self.conclude_revalidation(state, attempts, rounds, resumed=attempts[-1].experiment_id
                                                not in measured)

    def next_finalist(self, state: RunState, attempts: list[ExperimentRecord], baseline: Evaluation
                      ) -> Incumbent | None:
        """The next-best promotion to revalidate after `attempts[-1]` failed, said in the live log and the
        journal; None when none is left, a commit failed, or a whole revalidation no longer fits."""
        failed = attempts[-1]
        following = revalidation_id(len(attempts) + 1)
        recorded = self.resume.record(following) if self.resume else None
        candidate = finalists.next_best(state.experiments, {a.parent_id or "" for a in attempts})
        if recorded is not None:  # the dead run had tried it: its record says which
            candidate = next(e for e in state.experiments if e.experiment_id == recorded.parent_id)
        left = state.deadline - trio.current_time()
        reserve = revalidation_reserve(self.config.budget.max_total_seconds, baseline)
        expected = revalidation_seconds(failed, reserve)
        if candidate is None:
            why_not = "no earlier promotion is left to revalidate"
        elif self.commit_step.failed:
            why_not = "a commit of the run failed: its checkout is left as it is"
        elif recorded is None and not revalidation_fits(left, expected):
            why_not = (f"the next-best {candidate.experiment_id} needs about {expected:.0f} s of workers to "
                       f"revalidate, {max(left, 0.0):.0f} s are left (--max-total-seconds)")
        else:
            why_not = ""
        if candidate is None or why_not:
            self.finalists_stop = why_not
            self.log.event(f"final status=no_next_best after={failed.parent_id} reason={quote(why_not)}")
            return None
        bound = finalists.chained_lower_bound(candidate, state.experiments)
        rejected = f"{failed.experiment_id} rejected: {failed.decision.reason if failed.decision else 'no decision'}"
        self.log.event(f"final status=next_best finalist={candidate.experiment_id} revalidation={following} "
                       f"after={failed.parent_id} chained_lower_bound={bound:.4f}x expected_seconds={expected:.0f} "
                       f"seconds_left={max(left, 0.0):.0f} reason={quote(rejected)}")
        self.artifacts.journal("finalist_fallback", failed=failed.parent_id or "", revalidation_id=failed.experiment_id,
                               next=candidate.experiment_id, next_revalidation_id=following,
                               chained_lower_bound=bound, expected_seconds=expected, seconds_left=max(left, 0.0))
        return incumbent_of(candidate, Incumbent("baseline", self.inputs.kernel_source,
                                                 self.artifacts.root / "experiments/baseline/kernel.py", baseline))

    async def revalidate(self, state: RunState, incumbent: Incumbent, revalidation: str) -> ExperimentRecord:
        """Re-measure a finalist in fresh workers next to fresh baseline runs; the record says whether it held."""
        assert self.evaluator is not None and self.side_by_side is not None
        self.log.event(f"{revalidation} status=revalidating winner={incumbent.experiment_id}")
        final_path = self.artifacts.write_source(revalidation, incumbent.source)
        baseline_path = self.artifacts.root / "experiments/baseline/kernel.py"
        state.written_sources[str(final_path)] = raw_digest(incumbent.source)
        baseline_evaluation = next(r for r in state.experiments if r.experiment_id == "baseline").evaluations[0]
        promotion = next((e for e in state.experiments if e.experiment_id == incumbent.experiment_id), None)
        ruling = await self.side_by_side.decide(
            state, revalidation, role=Role.FINAL, candidate=Source(final_path, normalized_digest(incumbent.source)),
            incumbent=Source(baseline_path, normalized_digest(self.inputs.kernel_source)), deadline=state.deadline,
            test_seed=self.draw_test_seed(revalidation),
            evidence=profile_step.evidence(self.evaluator, state, baseline_evaluation),
            profile_deferred=promotion is not None and promotion.profile_deferred)
        record = ExperimentRecord(experiment_id=revalidation, parent_id=incumbent.experiment_id,
                                  source_sha256=raw_digest(incumbent.source),
                                  normalized_sha256=normalized_digest(incumbent.source), source_path=str(final_path),
                                  metadata=promotion.metadata if promotion is not None else CandidateMetadata(),
                                  evaluations=ruling.evaluations)
        apply_ruling(record, ruling)
        for line in record.profiles_not_taken:
            self.log.event(f"{revalidation} profile_not_taken=budget detail={quote(line)}")
        state.experiments.append(record)
        write_json(self.artifacts.experiment_dir(revalidation) / "result.json", record)
        write_json(self.artifacts.root / "experiments.json", state.experiments)
        self.log.event(reporting.decision_line(revalidation, record,
                                               status="revalidated" if ruling.promoted else "rejected"))
        return record

    async def conclude_revalidation(self, state: RunState, attempts: list[ExperimentRecord],
                                    rounds: tuple[StoppingReason, str], resumed: bool = False
                                    ) -> tuple[ExperimentRecord | None, Incumbent | None]:
        """Keep the revalidated winner's commits (rolled back to its checkpoint when it is not the last promotion)
        or roll them all back; `resumed`: the winner's revalidation was recorded before the run died (its
        diagnostic instrumentation is not collected again)."""
        assert self.evaluator is not None
        last = attempts[-1]
        later = finalists.attempts_detail(self.finalists)
        if last.decision is None or last.decision.status is not DecisionStatus.REVALIDATED:
            detail = reporting.revalidation_detail(attempts[0], later, self.finalists_stop)
            state.stop(StoppingReason.FINALIST_REVALIDATION_FAILED, detail)
            if not await self.commit_step.rollback(attempts[0].decision.reason if attempts[0].decision else detail):
                state.stop(StoppingReason.ROLLBACK_COMMIT_FAILED,
                           reporting.rollback_failed_detail(state.stopping_detail, self.commit_step.records))
            return None, None
        winner = next(e for e in state.experiments if e.experiment_id == last.parent_id)
        incumbent = promoted_incumbent(winner, Path(last.source_path).read_text(encoding="utf-8"),
                                       Path(winner.source_path))
        if len(attempts) > 1:  # a next-best won: the rounds' reason stands, the detail says what happened after
            first = attempts[0]
            state.stop(rounds[0], f"{rounds[1]}; the finalist {first.parent_id} failed revalidation "
                                  f"({first.decision.reason if first.decision else 'no decision'}); {later}")
            if not await self.commit_step.rollback(state.stopping_detail, keep=winner.experiment_id):
                state.stop(StoppingReason.ROLLBACK_COMMIT_FAILED,
                           reporting.rollback_failed_detail(state.stopping_detail, self.commit_step.records))
        self.commit_step.finalize()
        if not resumed:
            await profile_step.diagnostic_instrumentation(self.evaluator, state, last.experiment_id,
                                                          Path(last.source_path), state.deadline)
        return last, incumbent

    def finish(self, state: RunState, baseline: Evaluation, final_record: ExperimentRecord | None,
               winner: Incumbent | None) -> RunResult:
        source = winner.source if winner else self.inputs.kernel_source
        best_path = self.artifacts.root / "best_kernel.py"
        best_path.write_text(source, encoding="utf-8")
        final = next((e for e in final_record.evaluations if e.label == Role.FINAL.value), None) \
            if final_record is not None and winner is not None else None
        best = final if winner else baseline
        write_json(self.artifacts.root / "best_profile.json", reporting.profiles_by_case(best))
        exit_code = run_exit_code(state.stopping_reason, winner is not None, self.commit_step.failed)
        return reporting.build_result(
            config=self.config, inputs=self.inputs, state_experiments=state.experiments, baseline=baseline,
            final=final, final_record=final_record if winner else None,
            winner_id=winner.experiment_id if winner else "baseline", stopping_reason=state.stopping_reason,
            stopping_detail=state.stopping_detail, provider_explanation=state.provider_explanation,
            exit_code=exit_code, commits=self.commit_step.records,
            commit_summary=self.commit_step.summary(), best_path=best_path, wall_seconds=time.monotonic() - state.started,
            output_dir=self.artifacts.root, provider_failures=self.provider_failures.count, finalists=self.finalists)


def apply_ruling(record: ExperimentRecord, ruling: Ruling) -> None:
    """The referee's ruling into the experiment's record: the decision, the comparisons, the test and its noise."""
    verdict = ruling.verdict
    record.decision = ruling.decision
    record.comparisons = verdict.comparisons
    record.aggregate_speedup = verdict.aggregate_speedup
    record.profiles_not_taken = profiles_not_taken(ruling.evaluations)
    record.profile_deferred = ruling.profile_deferred
    if verdict.test is not None:
        record.statistics = verdict.test.model_dump(mode="json")
        record.statistics["between_run_noise"] = ruling.noise.as_dict()
    elif verdict.triage is not None:  # rejected on its first run: the bars it missed, and the noise they took
        record.statistics = {"triage": verdict.triage, "between_run_noise": ruling.noise.as_dict()}
    reused = ruling.reused_incumbent
    if reused is not None and record.statistics:  # decided on a run an earlier experiment's worker measured
        record.statistics["reused_incumbent_run"] = {
            "label": reused.label, "seed": reused.seed,
            "medians_us": {case.case_id: case.stats.median for case in reused.cases if case.stats is not None}}


def run_exit_code(stopping_reason: StoppingReason, has_winner: bool, commit_failed: bool) -> ExitCode:
    """0 with a revalidated winner, 2 without; a failed promotion or rollback commit overrides both with 3."""
    if commit_failed or stopping_reason in (StoppingReason.PROMOTION_COMMIT_FAILED,
                                            StoppingReason.ROLLBACK_COMMIT_FAILED):
        return ExitCode.COMMIT_FAILED
    return ExitCode.OK if has_winner else ExitCode.NO_WINNER
