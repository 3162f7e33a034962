"""The trusted autotune step and first-call measurements with real workers in Triton's interpreter
(orchestrator/autotune/step.py): the untouched kernel's own autotune once per key, its progress in the live log
as it happens (and a line when the worker is quiet), every event and reply through the protocol models."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
import trio

from orchestrator.autotune import step as step_module
from orchestrator.autotune.step import AutotuneStepFailed, StepWorkers, measure_first_call, run_step
from orchestrator.bundle.inputs import load_cases_file, load_target_file
from orchestrator.ledger.live_log import LiveLog
from orchestrator.worker import autotune_phase
from orchestrator.worker.process import SubprocessSpawner
from protocol.results import Evaluation
from tests.conftest import PROJECT_ROOT

EXAMPLE = PROJECT_ROOT / "examples" / "autotuned_add"

pytestmark = pytest.mark.timeout(300)


def workers(tmp_path: Path, seconds: float = 120.0) -> tuple[StepWorkers, io.StringIO]:
    stream = io.StringIO()
    return StepWorkers(run_id="t", harness_path=EXAMPLE / "harness.py", target=load_target_file(EXAMPLE / "target.json"),
                       cases=load_cases_file(EXAMPLE / "cases.json"), work_root=tmp_path / "autotune",
                       log=LiveLog(stream), spawner=SubprocessSpawner(), parent_env=dict(os.environ),
                       isolation="standard", worker_python=sys.executable, data_limit_bytes=None,
                       seconds=seconds), stream


def test_the_untouched_kernels_autotune_runs_once_per_key(tmp_path, monkeypatch):
    monkeypatch.setattr(autotune_phase, "HEARTBEAT_SECONDS", 0.02)
    step, stream = workers(tmp_path)
    record = trio.run(run_step, step, (EXAMPLE / "kernel.py").read_text())
    assert record is not None and record.kernels == ["add_kernel"]
    by_case = {tuple(c.case_ids): c for c in record.choices}
    assert set(by_case) == {("n2048",), ("ragged_1001",)}
    assert [c.key[0] for c in record.choices] == [2048, 1001]
    assert all(c.timer == "interpreter_cpu" and c.configs_tried == 4 and c.measured_ms for c in record.choices)
    assert all(c.compiled_ahead is None for c in record.choices)  # the interpreter compiles nothing
    first = record.untouched_first_call
    assert first is not None and (first.case_id, first.what, first.autotuned, first.timer) == (
        "n2048", "entry", 1, "interpreter_cpu")
    assert first.seconds >= first.import_seconds + first.call_seconds > 0
    # the step's worker, as its `finished` event reported it: each key autotuned once, four timings each
    evaluation = Evaluation.model_validate(json.loads((tmp_path / "autotune" / "result.json").read_text()))
    activity = evaluation.worker.autotune["worker"]
    assert (activity.mode, activity.tuned, activity.configurations_timed) == ("tune", 2, 8)
    assert activity.tuned_during == ["autotune"]
    # the first call had a fresh worker of its own: it autotuned its case's key again, as a user's process does
    first_worker = Evaluation.model_validate(json.loads((tmp_path / "autotune" / "untouched.json").read_text()))
    assert (first_worker.worker.autotune["worker"].tuned, first_worker.worker.autotune["worker"].tuned_during) == (
        1, ["first_call"])
    assert [m.correct for m in evaluation.cases] == [True, True]
    lines = stream.getvalue().splitlines()
    progress = [line for line in lines if "progress='configuration" in line and "status=running" not in line]
    assert [line.split("progress='")[1].split("'")[0] for line in progress] == \
        [f"configuration {i} of 4" for i in (1, 2, 3, 4)] * 3  # two keys in the step, one in the first call
    assert all("kernel=add_kernel" in line and "key='n_elements=" in line for line in progress)
    assert any("autotune status=running" in line for line in lines)  # a compile or a configuration kept the worker quiet for over 0.02 s
    assert sum("autotune choice kernel=add_kernel" in line for line in lines) == 2


def test_a_step_past_its_deadline_stops_with_what_to_change(tmp_path):
    # well below a worker's start alone (its torch import): the premise holds however fast the machine
    step, _stream = workers(tmp_path, seconds=0.5)
    with pytest.raises(AutotuneStepFailed) as failed:
        trio.run(run_step, step, (EXAMPLE / "kernel.py").read_text())
    message = str(failed.value)
    assert message.startswith("the untouched kernel's autotune step failed: timeout: ")
    assert "raise --max-autotune-seconds (now 0.5)" in message and "worker log: " in message


def test_a_first_call_the_steps_deadline_leaves_no_time_for_is_reported_not_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(step_module, "MIN_FIRST_CALL_SECONDS", 1e6)  # more than any step's deadline leaves
    step, stream = workers(tmp_path)
    record = trio.run(run_step, step, (EXAMPLE / "kernel.py").read_text())
    assert record is not None and len(record.choices) == 2  # the choices stand: the first call decides nothing
    assert record.untouched_first_call is None
    assert record.untouched_first_call_unmeasured.startswith("not measured: ")
    assert "s of the step's 120 s were left after its autotune" in record.untouched_first_call_unmeasured
    assert "first_call kernel=untouched status=skipped" in stream.getvalue()
    assert not (tmp_path / "autotune" / "untouched.json").exists()


def test_a_first_call_cut_by_the_deadline_is_longer_than_the_time_it_had(tmp_path):
    step, _stream = workers(tmp_path)
    # well below a worker's start alone: the premise holds however fast the machine
    first, why = trio.run(measure_first_call, step, EXAMPLE / "kernel.py", "untouched", 0.5)
    assert first is None and why.startswith("timeout: ")
    assert step_module.unmeasured_reason(why, 0.5) == (
        "longer than 0.5 s: stopped at the limit of its measurement (a fresh process pays at least that)")
    assert step_module.unmeasured_reason("error: boom", 9.0) == "failed: error: boom"


def test_a_kernel_without_a_list_to_choose_from_needs_no_step(tmp_path):
    step, stream = workers(tmp_path)
    single = (EXAMPLE / "kernel.py").read_text().split("        triton.Config({\"BLOCK_SIZE\": 128}")[0] + "    ],\n" \
        + (EXAMPLE / "kernel.py").read_text().split("    ],\n", 1)[1]
    assert single.count("triton.Config(") == 1
    assert trio.run(run_step, step, single) is None
    assert stream.getvalue() == "" and not (tmp_path / "autotune").exists()


def test_first_call_of_a_single_configuration_kernel_autotunes_nothing(tmp_path):
    step, _stream = workers(tmp_path)
    source = (EXAMPLE / "kernel.py").read_text()
    pruned = source.replace('        triton.Config({"BLOCK_SIZE": 64}, num_warps=1),\n', "").replace(
        '        triton.Config({"BLOCK_SIZE": 128}, num_warps=2),\n', "").replace(
        '        triton.Config({"BLOCK_SIZE": 256}, num_warps=4),\n', "")
    kernel = tmp_path / "pruned.py"
    kernel.write_text(pruned)

    async def both():
        return (await measure_first_call(step, kernel, "winner"),
                await measure_first_call(step, EXAMPLE / "kernel.py", "untouched"))

    (winner, why), (untouched, _) = trio.run(both)
    assert why == "" and winner is not None and untouched is not None
    assert (winner.autotuned, untouched.autotuned) == (0, 1)
    assert winner.call_seconds < untouched.call_seconds  # the untouched kernel's first call times four configurations
