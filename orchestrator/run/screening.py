"""Screening: rank many variants of the incumbent in one sandboxed worker, before the full evaluation.

A provider that proposes families of configurations (the tuner) gets `Screener.screen` through its context
(`ProposalContext.extra["screen"]`). Each call writes the variants under `screening/sNNN/`, runs one worker
that builds, verifies and briefly times every variant on every case (`sandbox_worker/screening.py`), and
appends one line per variant to `screening.jsonl`: its label, status, reason and median per case. Screening
never decides: the provider proposes the fastest few, and each proposal then goes through the same A/B/A
promotion gate, confirmation pairs and revalidation as any other candidate. Screening workers run no
profiler (issue 13: profiles where they pay).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation, sandbox_for
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
START_AND_SHUTDOWN_SECONDS = 20.0  # the worker's start, setup and shutdown around the variants


@dataclass(frozen=True)
class ScreeningResult:
    """A screened variant as the provider sees it: its label, the outcome and its medians."""

    label: str
    source: str
    variant: ScreenedVariant

    @property
    def ok(self) -> bool:
        return self.variant.status == "ok"


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
    def __init__(self, evaluator: Evaluator, state: RunState, deadline: float) -> None:
        self.evaluator = evaluator
        self.state = state
        self.deadline = deadline
        self.count = 0

    async def screen(self, variants: list[tuple[str, str]]) -> list[ScreeningResult]:
        """Screen (label, source) pairs; returns one result per pair, in order. An empty list when the
        screening worker itself failed (the provider then proposes without it)."""
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
        command = ScreenCommand(command_id=0, variants=[ScreenVariant(variant_id=f"v{i:02d}", kernel_path=str(p))
                                                        for i, p in enumerate(paths)],
                                cases=cases, seconds_per_case=SECONDS_PER_CASE, repetitions=REPETITIONS,
                                seed=secrets.randbelow(2**31), budget_seconds=seconds - START_AND_SHUTDOWN_SECONDS)
        plan = EvaluationPlan(
            label=Role.SCREENING.value, experiment_id=screen_id, run_id=self.state.run_id, kernel_path=paths[0],
            harness_path=evaluator.bundle.harness_path, target=evaluator.inputs.target, cases=evaluator.inputs.cases,
            repetitions=REPETITIONS, work_dir=work_dir, log_path=directory / "worker.log",
            deadline=min(self.deadline, trio.current_time() + seconds), phase_seconds=seconds,
            isolation=sandbox_for(evaluator.config.isolation, work_dir, None,
                                  data_limit_bytes=evaluator.config.data_limit_bytes, phase_seconds=seconds),
            worker_python=evaluator.config.worker_python, benchmark=False, screen=command)
        await evaluator.refuse_leftovers()
        evaluator.log.progress(f"{screen_id} screening {len(variants)} variant(s)")
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
        results = [ScreeningResult(label=label, source=source, variant=variant)
                   for (label, source), variant in zip(variants, screened, strict=True)]
        self._persist(screen_id, results, evaluation.worker.wall_seconds)
        ok = sum(1 for r in results if r.ok)
        evaluator.log.event(f"{screen_id} screening variants={len(results)} ok={ok} "
                            f"seconds={evaluation.worker.wall_seconds:.1f} worker_log={str(directory / 'worker.log')!r}")
        return results

    def _persist(self, screen_id: str, results: list[ScreeningResult], wall_seconds: float) -> None:
        path: Path = self.evaluator.artifacts.root / "screening.jsonl"
        with path.open("a", encoding="utf-8") as handle:
            for index, result in enumerate(results):
                record: dict[str, Any] = {"screen_id": screen_id, "variant": f"v{index:02d}", "label": result.label,
                                          **result.variant.model_dump(exclude={"variant_id"}),
                                          "worker_seconds": wall_seconds}
                handle.write(json.dumps(record, sort_keys=True) + "\n")
