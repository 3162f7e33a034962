"""Where a worker's time goes: every evaluation records seconds per phase, and the run's report sums them."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from orchestrator.ledger.reporting import worker_cost
from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import SubprocessSpawner
from protocol.bundle import load_cases_file, load_target_file
from protocol.results import WorkerRecord
from protocol.worker import IsolationConfig
from tests.conftest import SYNTHETIC


def test_a_real_workers_phases_account_for_its_wall_time(tmp_path: Path):
    work_dir = tmp_path / "worker"

    async def main():
        plan = EvaluationPlan(
            label="candidate", experiment_id="e001", run_id="cost", kernel_path=SYNTHETIC / "kernel.py",
            harness_path=SYNTHETIC / "harness.py", target=load_target_file(SYNTHETIC / "target.json"),
            cases=load_cases_file(SYNTHETIC / "cases.json"), repetitions=5, work_dir=work_dir,
            log_path=tmp_path / "worker.log", deadline=trio.current_time() + 60.0, phase_seconds=30.0,
            isolation=IsolationConfig(mode="standard", scratch_dir=str(work_dir), writable_dirs=[str(work_dir)]))
        return await run_evaluation(plan, SubprocessSpawner(), dict(os.environ))

    evaluation = trio.run(main)
    assert evaluation.status.value == "ok", evaluation.reason
    phases = evaluation.worker.phases
    assert list(phases) == ["start", "setup", "build", "verify", "benchmark", "shutdown", "teardown"]
    assert all(seconds >= 0 for seconds in phases.values())
    # the phases cover the evaluation from the spawn to the end of the process tree, less set-up before the spawn
    assert 0.8 * evaluation.worker.wall_seconds <= sum(phases.values()) <= evaluation.worker.wall_seconds + 0.01


def test_the_run_sums_each_phase_over_its_workers():
    workers = [WorkerRecord(wall_seconds=3.0, phases={"start": 1.0, "verify": 2.0}),
               WorkerRecord(wall_seconds=5.0, phases={"start": 1.5, "benchmark": 3.0})]
    assert worker_cost(workers) == {"wall": 8.0, "start": 2.5, "verify": 2.0, "benchmark": 3.0}
    assert worker_cost([]) == {"wall": 0.0}
