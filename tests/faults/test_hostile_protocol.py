"""Hostile protocol traffic never takes the orchestrator down and never passes for a clean result.

A scripted worker (`fake_worker.py`, a real subprocess behind the spawner seam) sends what a candidate
holding the protocol fd could send; `parse_event` gets the lines that used to raise out of the parser.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest
import trio

from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import (
    ProtocolViolation,
    SpawnedWorker,
    SubprocessSpawner,
    WorkerLaunch,
    parse_event,
)
from protocol.bundle import load_cases_file, load_target_file
from protocol.results import Evaluation
from tests.conftest import SYNTHETIC
from tests.faults.corpus import processes_of_run

FAKE_WORKER = Path(__file__).resolve().parent / "fake_worker.py"


class ScriptedSpawner(SubprocessSpawner):
    """Spawns fake_worker.py with the scenario instead of `python -m sandbox_worker`; same env and fd."""

    def __init__(self, scenario: str) -> None:
        self.scenario = scenario

    async def spawn(self, launch: WorkerLaunch) -> SpawnedWorker:
        return await super().spawn(dataclasses.replace(launch, argv=[sys.executable, str(FAKE_WORKER), self.scenario]))


def evaluate(tmp_path: Path, scenario: str) -> Evaluation:
    work_dir = tmp_path / "worker"

    async def main() -> Evaluation:
        plan = EvaluationPlan(
            label="candidate", experiment_id="e000", run_id="hostile", kernel_path=SYNTHETIC / "kernel.py",
            harness_path=SYNTHETIC / "harness.py", target=load_target_file(SYNTHETIC / "target.json"),
            cases=load_cases_file(SYNTHETIC / "cases.json"), repetitions=5, work_dir=work_dir,
            log_path=tmp_path / "worker.log", deadline=trio.current_time() + 20.0, phase_seconds=10.0)
        return await run_evaluation(plan, ScriptedSpawner(scenario), dict(os.environ))

    evaluation = trio.run(main)
    assert processes_of_run(tmp_path) == []
    return evaluation


SCENARIOS = [
    ("honest", "ok", "2/2 case(s) correct, 2 benchmarked"),
    ("wrong_command_id", "protocol_violation", "during build: reply for command 99 while waiting for command 1"),
    # seen before the next command is sent, or read as the answer to it: a violation either way
    ("double_reply", "protocol_violation", "for command 2"),
    ("event_flood", "protocol_violation", "unsolicited data before setup: a finished event"),
    ("huge_samples", "protocol_violation", "benchmark reply invalid: samples_us.0: Input should be less than"),
    ("non_finite", "protocol_violation", "invalid JSON on the protocol channel: non-finite number NaN"),
    ("after_finished", "protocol_violation", "during shutdown: data after the finished event: a reply event"),
    ("silent_shutdown", "timeout", "timed out in shutdown: no finished event"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("scenario", "status", "reason"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_hostile_worker_ends_in_one_status(tmp_path, scenario, status, reason):
    evaluation = evaluate(tmp_path, scenario)
    assert (evaluation.status.value, reason in evaluation.reason) == (status, True), evaluation.reason
    assert "\n" not in evaluation.reason


HOSTILE_LINES = {
    "nested_200000_deep": b'{"kind": "finished", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
    "integer_of_5000_digits": b'{"kind": "reply", "command_id": ' + b"9" * 5000 + b', "value": {}, "seconds": 0}',
    "nan": b'{"kind": "reply", "command_id": 1, "value": {}, "seconds": NaN}',
    "infinity": b'{"kind": "reply", "command_id": 1, "value": {}, "seconds": -Infinity}',
    "float_overflow": b'{"kind": "reply", "command_id": 1, "value": {"m": 1e999}, "seconds": 0}',
    "not_utf8": b'{"kind": "\xff"}',
    "not_an_object": b"[1, 2, 3]",
    "unknown_kind": b'{"kind": "result", "passed": true}',
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", HOSTILE_LINES)
def test_hostile_line_is_a_protocol_violation(name):
    with pytest.raises(ProtocolViolation):
        parse_event(HOSTILE_LINES[name])
