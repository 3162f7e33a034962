"""The winner's first call, measured after its revalidation the way the untouched kernel's was (a fresh worker
that loads it and calls it once), so the report shows what a user's first call pays before and after. A step of
the run (it takes the run's evaluator and state); the measuring itself is orchestrator/autotune/step.py's."""

from __future__ import annotations

import trio

from orchestrator.autotune.step import StepWorkers, measure_first_call
from orchestrator.run.evaluator import Evaluator
from orchestrator.run.state import Incumbent, RunState
from protocol.autotune import AutotuneRecord

MIN_SECONDS = 5.0  # less than this left in the run: the measurement is skipped, and the report says nothing


async def winner_first_call(evaluator: Evaluator, state: RunState, winner: Incumbent) -> AutotuneRecord | None:
    """The run's autotune record with the winner's first call added (as it was when there is no time left)."""
    record = evaluator.config.autotune
    if record is None:
        return None
    left = min(state.deadline - trio.current_time(), evaluator.config.budget.max_autotune_seconds)
    if left < MIN_SECONDS:
        evaluator.log.event(f"first_call kernel=winner status=skipped reason='{max(left, 0.0):.0f} s left in the run'")
        return record
    workers = StepWorkers(run_id=state.run_id, harness_path=evaluator.bundle.harness_path,
                          target=evaluator.inputs.target, cases=evaluator.inputs.cases,
                          work_root=evaluator.artifacts.root / "autotune", log=evaluator.log, spawner=evaluator.spawner,
                          parent_env=evaluator.parent_env, isolation=evaluator.config.isolation,
                          worker_python=evaluator.config.worker_python,
                          data_limit_bytes=evaluator.config.data_limit_bytes, seconds=left)
    first, _why = await measure_first_call(workers, winner.kernel_path, "winner")
    return record.model_copy(update={"winner_first_call": first, "winner_experiment_id": winner.experiment_id})
