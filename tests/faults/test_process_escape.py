"""A candidate that detaches a spinner (double fork, setsid, execve with an empty environment) and reaches for
other processes: after its evaluation nothing of it is alive, the processes it aimed at are unchanged, and
the run goes on. The worker's PID namespace does it (sandbox_worker/isolation/pidns.py), not the token sweep:
the spinner carries no token.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio

from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import SubprocessSpawner
from orchestrator.worker.process_tree import find_leftovers
from protocol.bundle import load_cases_file, load_target_file
from protocol.results import Evaluation
from protocol.worker import IsolationConfig
from tests.conftest import SYNTHETIC, synthetic_kernel
from tests.faults.corpus import CANDIDATES_DIR, processes_of_run, run_fault
from tests.faults.test_fault_corpus import assert_contained

CANDIDATE = "detached_spinner_reaches_out"


@contextlib.contextmanager
def other_worker() -> Iterator[psutil.Process]:
    """A process outside the evaluation standing in for another worker: it must stay alive and unchanged."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], stdin=subprocess.DEVNULL)
    try:
        yield psutil.Process(process.pid)
    finally:
        process.kill()
        process.wait()


def observe(process: psutil.Process) -> tuple[bool, int, list[int]]:
    return process.is_running(), process.nice(), sorted(process.cpu_affinity())


def escape_block(marker: str, targets: list[int]) -> str:
    """The candidate's own escape code (tests/faults/candidates/detached_spinner_reaches_out.py), for a kernel
    of the synthetic bundle."""
    source = (CANDIDATES_DIR / f"{CANDIDATE}.py").read_text()
    block = source[source.index("SPINNER = "):source.index("@triton.jit")]
    return "import os, sys\n" + block.replace("__MARKER__", marker).replace("__TARGET_PIDS__", json.dumps(targets))


def reach_report(log: Path) -> dict[str, Any]:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("reach-report ")]
    assert len(lines) == 1, log.read_text(errors="replace")[-2000:]
    return json.loads(lines[0].removeprefix("reach-report "))


def marked(marker: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if marker in (proc.info["cmdline"] or []) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
    return found


def evaluate(tmp_path: Path, source: str) -> Evaluation:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(source)
    work_dir = tmp_path / "worker"

    async def main() -> Evaluation:
        plan = EvaluationPlan(
            label="candidate", experiment_id="e000", run_id="escape", kernel_path=kernel,
            harness_path=SYNTHETIC / "harness.py", target=load_target_file(SYNTHETIC / "target.json"),
            cases=load_cases_file(SYNTHETIC / "cases.json"), repetitions=5, work_dir=work_dir,
            log_path=tmp_path / "worker.log", deadline=trio.current_time() + 30.0, phase_seconds=30.0,
            isolation=IsolationConfig(scratch_dir=str(work_dir), writable_dirs=[str(work_dir)]))
        return await run_evaluation(plan, SubprocessSpawner(), dict(os.environ))

    return trio.run(main)


def assert_reached_nothing(report: dict[str, Any], targets: list[int]) -> None:
    assert report["environ"] == ""  # no token: the sweep by environment could not have found it
    for pid in targets:
        assert report[str(pid)] == {"setpriority": "ESRCH", "sched_setaffinity": "ESRCH", "kill": "ESRCH"}, report
        assert pid not in report["visible_pids"]  # /proc is the namespace's own


@pytest.mark.timeout(60)
def test_a_detached_spinner_ends_with_its_evaluation_and_changes_nothing_outside(tmp_path):
    marker = f"tlx-spinner-{uuid.uuid4().hex}"
    with other_worker() as target:
        before = observe(target)
        evaluation = evaluate(tmp_path, synthetic_kernel(100.0, prelude=escape_block(marker, [target.pid])))
        after = observe(target)
    if evaluation.worker.isolation.get("processes") != "active":
        pytest.skip(f"no PID namespace on this machine: {evaluation.worker.isolation.get('processes')}")
    assert evaluation.status.value == "ok", evaluation.reason  # the run can go on: the kernel itself was honest
    assert evaluation.worker.leftover_processes_killed == 1  # the spinner, counted before its namespace ended
    assert marked(marker) == []
    assert processes_of_run(tmp_path) == []
    assert find_leftovers({str(tmp_path / "worker"): "e000"}) == []  # what the run checks before measuring again
    assert_reached_nothing(reach_report(tmp_path / "worker.log"), [target.pid])
    assert after == before  # alive, same nice value, same CPUs


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_detached_spinner_through_the_cli_is_contained_and_the_run_goes_on(tmp_path):
    marker = f"tlx-spinner-{uuid.uuid4().hex}"
    with other_worker() as first, other_worker() as second:
        before = [observe(first), observe(second)]
        targets = [first.pid, second.pid]
        run = run_fault(tmp_path, CANDIDATE, substitutions={"__MARKER__": marker, "__TARGET_PIDS__": json.dumps(targets)})
        after = [observe(first), observe(second)]
    processes_layer = json.loads((run.output_dir / "run.json").read_text())["isolation"]["probe"].get("processes")
    if processes_layer != "active":
        pytest.skip(f"no PID namespace on this machine: {processes_layer}")
    assert_contained(run, "incorrect", "protected case n256 failed", markers=(marker,))
    assert run.candidate_evaluation()["worker"]["leftover_processes_killed"] == 1
    assert_reached_nothing(reach_report(run.worker_log), targets)
    assert after == before
