"""100 evaluations in one trio run: no fd leaks, no zombies, no survivors, every status as expected.

Runs `run_evaluation` directly (what the run loop calls) on the fast synthetic bundle with a rotation of
honest and faulty kernels, so every cleanup path (clean shutdown, timeout, crash, protocol violation,
escapees, children holding the protocol socket, flooded output) is taken ten times.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import trio

from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import SubprocessSpawner
from protocol.bundle import load_cases_file, load_target_file
from protocol.results import Evaluation
from protocol.worker import IsolationConfig
from tests.conftest import SYNTHETIC, synthetic_kernel
from tests.faults.corpus import processes_of_run

pytestmark = pytest.mark.slow

EVALUATIONS = 100
PHASE_SECONDS = 1.5
LOG_LIMIT_BYTES = 64 * 1024

FORGE_ON_PROTOCOL_FD = """import json, os
def _forge():
    line = json.dumps({"kind": "reply", "command_id": 2, "value": {"passed": True}, "seconds": 0.0}) + "\\n"
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + name).startswith("socket:"):
                os.write(int(name), line.encode())
        except OSError:
            pass
"""
ESCAPE_WITH_SETSID = """import os, sys
_child = os.fork()
if _child == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(100000)"])
    os._exit(0)
os.waitpid(_child, 0)
"""
CHILDREN_HOLDING_THE_SOCKET = """import os, time
for _ in range(5):
    if os.fork() == 0:
        while True:
            time.sleep(1)
"""


@dataclass(frozen=True)
class Kind:
    name: str
    source: str
    status: str


KINDS = [
    Kind("honest", synthetic_kernel(100.0), "ok"),
    Kind("incorrect", synthetic_kernel(100.0, body="return [v * 3.0 for v in values]"), "incorrect"),
    Kind("segfault", synthetic_kernel(100.0, body="import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"),
         "crashed"),
    Kind("import_error", synthetic_kernel(100.0, prelude="raise ImportError('fault')"), "build_failed"),
    Kind("hang", synthetic_kernel(100.0, body="import time; time.sleep(3600)"), "timeout"),
    Kind("forged_reply", synthetic_kernel(100.0, prelude=FORGE_ON_PROTOCOL_FD,
                                          body="_forge(); return [v * 3.0 for v in values]"), "protocol_violation"),
    Kind("setsid_escapee", synthetic_kernel(100.0, prelude=ESCAPE_WITH_SETSID), "ok"),
    Kind("children_hold_socket", synthetic_kernel(100.0, prelude=CHILDREN_HOLDING_THE_SOCKET), "ok"),
    Kind("stdout_flood", synthetic_kernel(100.0, prelude="import os\nfor _ in range(64):\n    os.write(1, b'y' * 65536)"),
         "ok"),
    Kind("exit_at_import", synthetic_kernel(100.0, prelude="import os\nos._exit(7)"), "crashed"),
]


def open_fds() -> list[str]:
    found = []
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the fd listdir itself used is gone already
            found.append(f"{name}->{os.readlink(f'/proc/self/fd/{name}')}")
    return sorted(found)


def children() -> list[str]:
    return sorted(f"{c.pid}:{c.status()}" for c in psutil.Process().children(recursive=True))


def make_plan(root: Path, index: int, kind: Kind) -> EvaluationPlan:
    kernel = root / "kernels" / f"{kind.name}.py"
    if not kernel.exists():
        kernel.parent.mkdir(parents=True, exist_ok=True)
        kernel.write_text(kind.source)
    work_dir = root / "workers" / f"{index:03d}-{kind.name}"
    return EvaluationPlan(
        label="candidate", experiment_id=f"e{index:03d}", run_id="hygiene", kernel_path=kernel,
        harness_path=SYNTHETIC / "harness.py", target=load_target_file(SYNTHETIC / "target.json"),
        cases=load_cases_file(SYNTHETIC / "cases.json"), repetitions=5, work_dir=work_dir,
        log_path=root / "logs" / f"{index:03d}-{kind.name}.log", deadline=trio.current_time() + 20.0,
        phase_seconds=PHASE_SECONDS, log_limit_bytes=LOG_LIMIT_BYTES,
        isolation=IsolationConfig(mode="standard", scratch_dir=str(work_dir), writable_dirs=[str(work_dir)]))


@pytest.mark.timeout(420)
def test_hundred_evaluations_leak_no_fds_and_leave_no_processes(tmp_path):
    (tmp_path / "logs").mkdir()
    spawner = SubprocessSpawner()
    results: list[tuple[Kind, Evaluation]] = []
    snapshots: dict[str, tuple[list[str], list[str]]] = {}

    async def main() -> None:
        # one evaluation first, so trio's own lazily opened fds (epoll, wakeup socket) are in the baseline
        await run_evaluation(make_plan(tmp_path, 999, KINDS[0]), spawner, dict(os.environ))
        snapshots["before"] = (open_fds(), children())
        for index in range(EVALUATIONS):
            kind = KINDS[index % len(KINDS)]
            results.append((kind, await run_evaluation(make_plan(tmp_path, index, kind), spawner, dict(os.environ))))
        snapshots["after"] = (open_fds(), children())

    trio.run(main)

    unexpected = [(kind.name, e.status.value, e.reason) for kind, e in results if e.status.value != kind.status]
    assert unexpected == []
    assert all(e.reason and "\n" not in e.reason for _, e in results)
    fds_before, children_before = snapshots["before"]
    fds_after, children_after = snapshots["after"]
    assert fds_after == fds_before
    assert children_after == children_before == []  # no zombies either: psutil lists them as children
    assert processes_of_run(tmp_path) == []
    escapees = [e.worker.leftover_processes_killed for kind, e in results if kind.name == "setsid_escapee"]
    assert escapees == [1] * (EVALUATIONS // len(KINDS))
    logs = sorted((tmp_path / "logs").glob("*-stdout_flood.log"))
    assert logs and all(log.stat().st_size <= LOG_LIMIT_BYTES + 256 for log in logs)
