"""Screening: rank many variants of the incumbent in one sandboxed worker, before the full evaluation.

A provider that proposes families of configurations (the tuner) gets the `Screener` through its context
(`ProposalContext.screener`; the contract is orchestrator/providers/screening.py). Each call writes the variants under `screening/sNNN/`, runs one worker
that builds, verifies and briefly times every variant on every case (`sandbox_worker/screening.py`), and
appends one line per variant to `screening.jsonl`: its label, status, reason, normalized source digest and
median per case. A variant whose build failed (or that compile ahead held back) is refused for the rest of the run,
whichever provider proposes it again (orchestrator/run/refusals.py). Screening never decides: the provider proposes the fastest few, and each proposal then goes through the same A/B/A
promotion gate, confirmation pairs and revalidation as any other candidate. Screening workers run no
profiler: profiles are taken where they pay, on the candidates the gate measures.

On a CUDA target every variant is compiled for the target first, on the host (orchestrator/run/screening_ahead.py):
one over the device's limits, or whose compile fails, comes back `build_failed` with the resource named and
never reaches the worker; its configs are remembered in `infeasible_configs.jsonl`. Each variant compiles alone in
its own child, so what it compiled is kept for that exact source's later workers (orchestrator/worker/kernel_cache.py):
a screened variant the gate then measures starts with its kernels compiled. The screening worker itself runs many
sources in one process and keeps nothing.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from orchestrator.compile_ahead.ahead import (
    STORE_NAME,
    compile_target_for,
    device_properties_for,
    remember_infeasible,
)
from orchestrator.compile_ahead.feasibility import Verdict
from orchestrator.compile_ahead.store import InfeasibleStore
from orchestrator.compile_ahead.variants import VariantCheck, VariantJob, check_variants
from orchestrator.providers.screening import ScreeningResult
from orchestrator.run import screening_ahead
from orchestrator.run.refusals import SCREENING_LOG, screening_refusal
from orchestrator.source_digest import normalized_digest, raw_digest
from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation, sandbox_for
from orchestrator.worker.verdict_fallback import screening_target
from protocol.results import EvaluationStatus
from protocol.roles import Role
from protocol.worker import ScreenCommand, ScreenedVariant, ScreenVariant
from sandbox_worker.screening import PROGRESS_FILE

if TYPE_CHECKING:
    from orchestrator.run.evaluator import Evaluator
    from orchestrator.run.state import RunState

SECONDS_PER_CASE = 0.3  # brief: ranking needs the order of magnitude, the gate measures the rest
REPETITIONS = 5
MAX_VARIANTS = 64
# A screening may spend this share of the time left before revalidation: on the H200 a 16-variant matmul
# family (compiles included) outlasted a 250 s run's budget, and a screening cut off returns nothing.
SHARE_OF_TIME_LEFT = 0.35
# The worker's start, setup and shutdown around the variants: start to ready took 5.9 s for a fresh interpreter on
# the H200 and 0.3 s for a worker forked by the run's fork server (docs/results/2026-12-02-tuner-softmax-600s.md).
# It was 20 s, and a 200 s run on an H100 whose baseline spent 42 s on its deep profile skipped every screening
# with 95 s left (twice this is the least a screening is given).
START_AND_SHUTDOWN_SECONDS = 8.0


def _progress(path: Path, variants: list[ScreenVariant]) -> list[ScreenedVariant]:
    """What a screening stopped at its deadline had measured (sandbox_worker/screening.py writes one line per
    variant, in order); every variant without a valid line comes back unscreened. Ranking input only."""
    found: list[ScreenedVariant] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()[:len(variants)]
    except OSError:
        lines = []
    for line, variant in zip(lines, variants, strict=False):
        try:
            parsed = ScreenedVariant.model_validate_json(line)
        except ValueError:
            break
        if parsed.variant_id != variant.variant_id:
            break
        found.append(parsed)
    return found + [ScreenedVariant(variant_id=v.variant_id, status="failed",
                                    reason="not screened: the screening was stopped at its deadline")
                    for v in variants[len(found):]]


class Screener:
    """The run's `orchestrator.providers.screening.Screener`: one sandboxed worker per call."""

    def __init__(self, evaluator: Evaluator, state: RunState, deadline: float) -> None:
        self.evaluator = evaluator
        self.state = state
        self.deadline = deadline
        self.count = 0
        self.store = InfeasibleStore(evaluator.artifacts.root / STORE_NAME)

    async def screen(self, variants: list[tuple[str, str]], *, observe: bool = False) -> list[ScreeningResult]:
        """orchestrator/providers/screening.py `Screener.screen`: one result per (label, source) pair, in order."""
        if not variants:
            return []
        if len(variants) > MAX_VARIANTS:
            raise ValueError(f"at most {MAX_VARIANTS} variants per screening, got {len(variants)}")
        evaluator = self.evaluator
        self.count += 1
        screen_id = f"s{self.count:03d}"
        directory = evaluator.artifacts.root / "screening" / screen_id
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for index, (_, source) in enumerate(variants):
            path = directory / f"v{index:02d}.py"
            path.write_text(source, encoding="utf-8")
            paths.append(path)
        budget = evaluator.config.budget
        work_dir = directory / "worker"
        cases = [case.model_dump() for case in evaluator.inputs.cases]
        # every variant builds, verifies and is timed: at most the candidate's limit each, and a share of what
        # is left; the worker stops starting variants in time to return what it measured
        left = self.deadline - trio.current_time()
        seconds = min(budget.max_candidate_seconds * max(1, len(variants)), SHARE_OF_TIME_LEFT * left)
        if seconds < 2 * START_AND_SHUTDOWN_SECONDS:
            evaluator.log.event(f"{screen_id} screening status=skipped reason='{left:.0f} s left: too little to screen'")
            return []
        started = trio.current_time()
        variant_ids = [f"v{index:02d}" for index in range(len(paths))]
        checks = await self._compile_ahead(screen_id, directory, paths, seconds)
        split = screening_ahead.partition(variant_ids, checks)
        if split.note:
            evaluator.log.event(f"{screen_id} compile_ahead note={split.note!r}")
        for index, held in split.held_back.items():
            evaluator.log.event(f"{screen_id} {held.variant_id} label={variants[index][0]!r} status=build_failed "
                                f"reason={held.reason!r}")
        seconds = max(2 * START_AND_SHUTDOWN_SECONDS, seconds - (trio.current_time() - started))  # less compile ahead
        command = ScreenCommand(command_id=0, variants=[ScreenVariant(variant_id=variant_ids[i], kernel_path=str(paths[i]))
                                                        for i in split.to_worker],
                                cases=cases, seconds_per_case=SECONDS_PER_CASE, repetitions=REPETITIONS,
                                seed=secrets.randbits(64), budget_seconds=seconds - START_AND_SHUTDOWN_SECONDS,
                                observe_locals=observe)
        plan = EvaluationPlan(
            label=Role.SCREENING.value, experiment_id=screen_id, run_id=self.state.run_id, kernel_path=paths[0],
            harness_path=evaluator.bundle.harness_path, target=screening_target(evaluator.worker_target(self.state)),
            cases=evaluator.inputs.cases,
            repetitions=REPETITIONS, work_dir=work_dir, log_path=directory / "worker.log",
            deadline=min(self.deadline, trio.current_time() + seconds), phase_seconds=seconds,
            isolation=sandbox_for(evaluator.config.isolation, work_dir, None,
                                  data_limit_bytes=evaluator.config.data_limit_bytes, phase_seconds=seconds),
            worker_python=evaluator.config.worker_python, benchmark=False, screen=command,
            autotune=evaluator.autotune_setup())
        await evaluator.refuse_leftovers()
        evaluator.log.progress(f"{screen_id} screening {len(command.variants)} variant(s)")
        evaluation = await run_evaluation(plan, evaluator.spawner, evaluator.parent_env)
        evaluator.finished_workers[str(work_dir)] = f"{screen_id} {Role.SCREENING.value}"
        evaluator.artifacts.journal("evaluation", experiment_id=screen_id, label=Role.SCREENING.value,
                                    tag=f"screening of {len(variants)} variant(s)", status=evaluation.status.value,
                                    reason=evaluation.reason, wall_seconds=evaluation.worker.wall_seconds)
        evaluator.check_bundle(self.state)
        screened = evaluation.screening
        if evaluation.status is not EvaluationStatus.OK or screened is None:
            screened = _progress(work_dir / PROGRESS_FILE, command.variants)
            evaluator.log.event(f"{screen_id} screening status={evaluation.status.value} "
                                f"reason={evaluation.reason!r} measured_before_it={sum(v.status == 'ok' for v in screened)}")
            if not any(v.status == "ok" for v in screened):
                return []
        merged = screening_ahead.merge(variant_ids, split.held_back, screened)
        results = [ScreeningResult(label=label, source=source, variant=variant, ahead=check)
                   for (label, source), variant, check in zip(variants, merged, checks, strict=True)]
        self._persist(screen_id, results, evaluation.worker.wall_seconds)
        for index, result in enumerate(results):  # no provider gets a round for these again (run/refusals.py)
            why = screening_refusal(screen_id, f"v{index:02d}", result.label, result.variant.status,
                                    result.variant.reason)
            if why is not None:
                self.state.refused.setdefault(normalized_digest(result.source), why)
        ok = sum(1 for r in results if r.ok)
        evaluator.log.event(f"{screen_id} screening variants={len(results)} ok={ok} "
                            f"seconds={evaluation.worker.wall_seconds:.1f} worker_log={str(directory / 'worker.log')!r}")
        return results

    async def _compile_ahead(self, screen_id: str, directory: Path, paths: list[Path],
                             seconds: float) -> list[VariantCheck | None]:
        """Each variant's compile ahead, or None for each when the target takes none; infeasible configs are
        remembered, and every compile is kept in `compile_ahead.json` next to the variants."""
        evaluator = self.evaluator
        target = compile_target_for(evaluator.inputs.target)
        if target is None:
            return [None] * len(paths)
        cases = [case.model_dump() for case in evaluator.inputs.cases]
        properties = device_properties_for(evaluator.inputs.target, self.state.device)
        jobs = [VariantJob(source_path=path, harness_path=evaluator.bundle.harness_path, cases=cases, target=target,
                           python=evaluator.config.worker_python, environment=dict(evaluator.inputs.target.environment),
                           device_properties=properties) for path in paths]
        share = screening_ahead.SHARE_OF_SCREENING * seconds
        evaluator.log.progress(f"{screen_id} compiling {len(paths)} variant(s) ahead for {target.limits.sm}")
        checks = await check_variants(jobs, seconds_per_variant=min(screening_ahead.SECONDS_PER_VARIANT, share),
                                      max_parallel=screening_ahead.lanes_for_host(),
                                      deadline=trio.current_time() + share,
                                      keep_kernels=evaluator.kernel_cache.keep,
                                      progress=lambda done, total, elapsed: evaluator.log.event(
                                          f"{screen_id} compile_ahead variants_done={done} of {total} "
                                          f"seconds={elapsed:.0f} (at most {share:.0f} s)"))
        for path, check in zip(paths, checks, strict=True):
            source = path.read_text(encoding="utf-8")
            remember_infeasible(self.store, source, check)
            if check.feasibility.verdict is Verdict.FEASIBLE:
                self.state.compiled_ahead.setdefault(raw_digest(source), screen_id)
        (directory / "compile_ahead.json").write_text(
            json.dumps([check.model_dump(mode="json") for check in checks], indent=1), encoding="utf-8")
        verdicts = [check.feasibility.verdict.value for check in checks]
        evaluator.log.event(f"{screen_id} compile_ahead target={target.limits.sm} variants={len(checks)} "
                            f"infeasible={verdicts.count('infeasible')} unknown={verdicts.count('unknown')} "
                            f"seconds={max((check.seconds for check in checks), default=0.0):.1f} "
                            f"kernel_groups_kept={sum(check.kernel_groups_kept for check in checks)}")
        return list(checks)

    def _persist(self, screen_id: str, results: list[ScreeningResult], wall_seconds: float) -> None:
        path: Path = self.evaluator.artifacts.root / SCREENING_LOG
        with path.open("a", encoding="utf-8") as handle:
            for index, result in enumerate(results):
                record: dict[str, Any] = {"screen_id": screen_id, "variant": f"v{index:02d}", "label": result.label,
                                          **result.variant.model_dump(exclude={"variant_id"}),
                                          "normalized_sha256": normalized_digest(result.source),
                                          "worker_seconds": wall_seconds}
                if result.ahead is not None:
                    record["compile_ahead"] = screening_ahead.summary(result.ahead)
                handle.write(json.dumps(record, sort_keys=True) + "\n")
