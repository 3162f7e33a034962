"""Resource limits end as `resource_limit` naming the limit (synthetic bundle, `run_evaluation` directly)."""

from __future__ import annotations

import os

import pytest
import trio

from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import SubprocessSpawner
from protocol.bundle import load_cases_file, load_target_file
from protocol.results import Evaluation
from protocol.worker import IsolationConfig
from tests.conftest import SYNTHETIC, synthetic_kernel
from tests.faults.corpus import processes_of_run


def evaluate(tmp_path, source: str, **limits) -> Evaluation:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(source)
    work_dir = tmp_path / "worker"

    async def main() -> Evaluation:
        plan = EvaluationPlan(
            label="candidate", experiment_id="e000", run_id="limits", kernel_path=kernel,
            harness_path=SYNTHETIC / "harness.py", target=load_target_file(SYNTHETIC / "target.json"),
            cases=load_cases_file(SYNTHETIC / "cases.json"), repetitions=5, work_dir=work_dir,
            log_path=tmp_path / "worker.log", deadline=trio.current_time() + 30.0, phase_seconds=30.0,
            isolation=IsolationConfig(scratch_dir=str(work_dir), writable_dirs=[str(work_dir)], **limits))
        return await run_evaluation(plan, SubprocessSpawner(), dict(os.environ))

    evaluation = trio.run(main)
    assert processes_of_run(tmp_path) == []
    return evaluation


@pytest.mark.timeout(60)
def test_cpu_time_limit_kills_a_spinning_candidate(tmp_path):
    evaluation = evaluate(tmp_path, synthetic_kernel(100.0, body="while True:\n        pass"), cpu_seconds=2)
    assert evaluation.status.value == "resource_limit", evaluation.reason
    assert evaluation.reason == "worker killed by SIGXCPU: CPU time limit (RLIMIT_CPU) during verify"


@pytest.mark.timeout(60)
def test_file_size_limit_fails_a_large_write(tmp_path):
    writer = synthetic_kernel(100.0, prelude="with open('big.bin', 'wb') as big:\n    big.write(b'x' * (3 << 20))")
    evaluation = evaluate(tmp_path, writer, file_size_bytes=1 << 20)
    assert evaluation.status.value == "resource_limit", evaluation.reason
    assert evaluation.reason == ("build: resource limit: file size (RLIMIT_FSIZE 1.00 MiB) exhausted: "
                                 "OSError: [Errno 27] File too large")
