"""A worker forked by the fork server (sandbox_worker/forkserver.py, orchestrator/worker/forkserver.py) is what
a fresh `python -s -m sandbox_worker` is to the orchestrator: the same isolation, exactly the requested
environment, only its own descriptors, an exit status that arrives, and a server that never leaks into it.

Real processes throughout: a fork server, fresh and forked workers, a harness that records what it sees.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio

from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.forkserver import ForkServerSpawner, ServerReady, make_spawner
from orchestrator.worker.process import SubprocessSpawner
from protocol.bundle import load_cases_file, load_target_file
from protocol.worker import IsolationConfig
from tests.conftest import PROJECT_ROOT, SYNTHETIC, synthetic_kernel
from tests.faults.corpus import processes_of_run
from tests.forkserver.workers import (
    PASSING_HARNESS_FUNCTIONS,
    Bundle,
    StartedWorker,
    start_to_ready,
    stop,
    worker_launch,
)

MARKER = "TRITON_FORKSERVER_TEST_MARKER"  # passes the worker allow-list; set only in the server's environment
SERVER_ONLY = (MARKER, "TLX_FORKSERVER_ENVIRON_ROOM", "TLX_FORKSERVER_PARENT", "TLX_FORKSERVER_FD")
# Imported by the worker during setup, after every isolation layer: what the harness (and the candidate) see.
OBSERVER_HARNESS = textwrap.dedent('''
    import json, os

    def _observe():
        fds = {}
        for name in os.listdir("/proc/self/fd"):
            try:
                fds[name] = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                pass
        with open("/proc/self/environ", "rb") as environ:
            shown = [entry.decode() for entry in environ.read().split(b"\\0") if entry]
        import numpy
        numpy.ones((256, 256)) @ numpy.ones((256, 256))  # numpy's BLAS thread pool is running from here on
        observed = {"environ": dict(os.environ), "shown": dict(item.split("=", 1) for item in shown), "fds": fds,
                    "threads": len(os.listdir("/proc/self/task"))}
        with open(os.path.join(os.environ["TLX_WORKER_SCRATCH"], "observed.json"), "w") as out:
            json.dump(observed, out)

    _observe()

''') + PASSING_HARNESS_FUNCTIONS


@dataclass
class Observed:
    started: StartedWorker
    inside: dict[str, Any]  # what the harness recorded
    outside_environ: dict[str, str]  # /proc/<worker pid>/environ, read by the orchestrator as the token sweep does
    returncode: int | None


@dataclass
class Pair:
    fresh: Observed
    forked: Observed
    server_ready: ServerReady
    server_threads: int
    server_pid: int
    statistics: dict[str, Any]


def observer_bundle(directory: Path) -> Bundle:
    directory.mkdir(parents=True)
    (directory / "harness.py").write_text(OBSERVER_HARNESS)
    (directory / "kernel.py").write_text(synthetic_kernel(100.0))
    (directory / "target.json").write_text((SYNTHETIC / "target.json").read_text())
    return Bundle.in_directory(directory)


async def observe(spawner: Any, bundle: Bundle, scratch: Path) -> Observed:
    launch = worker_launch(sys.executable, dict(os.environ), bundle, scratch)
    started = await start_to_ready(spawner, launch, bundle)
    outside = psutil.Process(started.spawned.process.pid).environ()
    inside = json.loads((scratch / "observed.json").read_text())
    return Observed(started, inside, outside, await stop(started))


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """One fresh and one forked worker on the same harness; the server's environment carries MARKER."""
    root = tmp_path_factory.mktemp("pair")
    bundle = observer_bundle(root / "bundle")
    found: dict[str, Any] = {}

    async def main() -> None:
        async with make_spawner("forkserver", parent_env={**os.environ, MARKER: "only-in-the-server"},
                                scratch=root / "server", log_path=root / "server.log") as spawner:
            assert isinstance(spawner, ForkServerSpawner)
            assert await spawner.wait_ready(), spawner.statistics()
            assert spawner.server is not None and spawner.server.ready is not None
            found["server_ready"] = spawner.server.ready
            found["server_pid"] = spawner.server.popen.pid
            found["server_threads"] = len(os.listdir(f"/proc/{spawner.server.popen.pid}/task"))
            found["fresh"] = await observe(SubprocessSpawner(), bundle, root / "fresh")
            found["forked"] = await observe(spawner, bundle, root / "forked")
            found["statistics"] = spawner.statistics()

    trio.run(main)
    return Pair(**found)


def test_server_imports_torch_and_triton_stays_single_threaded_and_never_initialises_cuda(pair: Pair):
    ready = pair.server_ready
    assert {"torch", "triton", "sandbox_worker.server", "sandbox_worker.harness_kit.timing"} <= set(ready.preloaded)
    assert ready.missing == {}
    assert ready.cuda_initialized is False
    assert ready.problem is None
    assert pair.server_threads == 1
    assert pair.statistics["forked"] == 1 and pair.statistics["fresh"] == 0
    assert pair.statistics["fallback_reason"] is None


def test_every_isolation_layer_is_active_in_a_forked_worker_when_it_is_in_a_fresh_one(pair: Pair):
    fresh, forked = pair.fresh.started.ready, pair.forked.started.ready
    assert forked.isolation == fresh.isolation
    assert (forked.pid_namespace is None) == (fresh.pid_namespace is None)
    assert forked.verdict_process == fresh.verdict_process


def test_forked_worker_environment_is_exactly_the_requested_one(pair: Pair):
    for observed in (pair.fresh, pair.forked):
        requested = observed.started.launch.env
        inside = observed.inside
        # TLX_PROTOCOL_FD names the socket's number, which differs; the worker pops it from os.environ
        assert inside["environ"] == requested
        assert {**inside["shown"], "TLX_PROTOCOL_FD": "?"} == {**requested, "TLX_PROTOCOL_FD": "?"}
        assert {**observed.outside_environ, "TLX_PROTOCOL_FD": "?"} == {**requested, "TLX_PROTOCOL_FD": "?"}
    assert pair.forked.outside_environ["TLX_PROTOCOL_FD"] == "3"
    for name in SERVER_ONLY:
        assert name not in pair.forked.outside_environ
        assert name not in pair.forked.inside["shown"]


def normalized(fds: dict[str, str]) -> dict[str, str]:
    return {fd: re.sub(r"\[\d+\]$", "", target) for fd, target in fds.items()}


def test_forked_worker_holds_only_its_passed_descriptors(pair: Pair):
    forked = normalized(pair.forked.inside["fds"])
    # the same descriptors as a fresh worker's (whose protocol socket has the number it had in the orchestrator)
    assert sorted(forked.values()) == sorted(normalized(pair.fresh.inside["fds"]).values())
    assert forked == {"0": "/dev/null", "1": "pipe:", "2": "pipe:", "3": "socket:"}
    assert pair.forked.inside["fds"]["1"] == pair.forked.inside["fds"]["2"]  # stdout and stderr share the log pipe
    assert pair.forked.returncode == pair.fresh.returncode == 0


def test_forked_worker_runs_as_many_blas_threads_as_a_fresh_one(pair: Pair):
    """The server shut numpy's OpenBLAS pool down before its first fork; a worker's first BLAS call starts it."""
    assert pair.forked.inside["threads"] == pair.fresh.inside["threads"]


def plan_for(root: Path, name: str, source: str, phase_seconds: float = 1.5) -> EvaluationPlan:
    kernel = root / "kernels" / f"{name}.py"
    kernel.parent.mkdir(parents=True, exist_ok=True)
    kernel.write_text(source)
    work_dir = root / "workers" / name
    return EvaluationPlan(
        label="candidate", experiment_id=name, run_id="forkserver", kernel_path=kernel,
        harness_path=SYNTHETIC / "harness.py", target=load_target_file(SYNTHETIC / "target.json"),
        cases=load_cases_file(SYNTHETIC / "cases.json"), repetitions=5, work_dir=work_dir,
        log_path=root / f"{name}.log", deadline=trio.current_time() + 30.0, phase_seconds=phase_seconds,
        isolation=IsolationConfig(mode="standard", scratch_dir=str(work_dir), writable_dirs=[str(work_dir)]))


def test_worker_killed_by_timeout_is_reaped_and_its_status_reported(tmp_path):
    found: dict[str, Any] = {}

    async def main() -> None:
        async with make_spawner("forkserver", parent_env=dict(os.environ), scratch=tmp_path / "server",
                                log_path=tmp_path / "server.log") as spawner:
            assert isinstance(spawner, ForkServerSpawner) and spawner.server is not None
            hang = synthetic_kernel(100.0, body="import time; time.sleep(3600)")
            found["evaluation"] = await run_evaluation(plan_for(tmp_path, "hang", hang), spawner, dict(os.environ))
            found["server_children"] = psutil.Process(spawner.server.popen.pid).children()
            found["statistics"] = spawner.statistics()
            found["server"] = spawner.server.popen

    trio.run(main)
    evaluation = found["evaluation"]
    assert evaluation.status.value == "timeout", evaluation.reason
    assert evaluation.worker.exit_code == -signal.SIGTERM  # the relay ends as the worker did: by SIGTERM
    assert evaluation.worker.signal == signal.SIGTERM
    assert found["server_children"] == []
    assert found["statistics"]["forked"] == 1 and found["statistics"]["server"]["live_workers"] == 0
    assert found["server"].returncode is not None  # killed and reaped when the spawner closed


def test_spawner_falls_back_to_fresh_interpreters_once_when_the_server_dies(tmp_path):
    notices: list[str] = []
    found: dict[str, Any] = {}

    async def main() -> None:
        async with make_spawner("forkserver", parent_env=dict(os.environ), scratch=tmp_path / "server",
                                log_path=tmp_path / "server.log", notify=notices.append) as spawner:
            assert isinstance(spawner, ForkServerSpawner) and spawner.server is not None
            honest = synthetic_kernel(100.0)
            found["before"] = await run_evaluation(plan_for(tmp_path, "before", honest), spawner, dict(os.environ))
            os.kill(spawner.server.popen.pid, signal.SIGKILL)
            found["after"] = [await run_evaluation(plan_for(tmp_path, f"after{i}", honest), spawner, dict(os.environ))
                              for i in range(2)]
            found["statistics"] = spawner.statistics()

    trio.run(main)
    assert found["before"].status.value == "ok", found["before"].reason
    assert [e.status.value for e in found["after"]] == ["ok", "ok"], [e.reason for e in found["after"]]
    assert found["statistics"]["forked"] == 1 and found["statistics"]["fresh"] == 2
    # the first forked worker's line, then the fallback, said once
    assert len(notices) == 2 and notices[0].startswith("worker start: forked by the fork server")
    fallback = notices[1]
    assert "fork server" in fallback and "fresh interpreter" in fallback and "\n" not in fallback
    assert found["statistics"]["fallback_reason"] in fallback
    assert "it exited (killed by SIGKILL)" in fallback


SERVER_DIES_MID_EVALUATION = textwrap.dedent("""
    import json, os, signal, sys, trio
    from pathlib import Path
    from orchestrator.worker.evaluation import run_evaluation
    from orchestrator.worker.forkserver import make_spawner
    from orchestrator.worker.process_tree import become_subreaper
    from tests.conftest import synthetic_kernel
    from tests.forkserver.test_forkserver import plan_for

    async def main():
        become_subreaper()  # as the run loop does
        root, notices = Path(sys.argv[1]), []
        slow = synthetic_kernel(100.0, body="import time; time.sleep(3); return [v * 2.0 for v in values]")
        async with make_spawner("forkserver", parent_env=dict(os.environ), scratch=root / "server",
                                notify=notices.append) as spawner:
            async def kill_the_server_while_a_worker_runs():
                while spawner.statistics()["server"]["live_workers"] == 0:
                    await trio.sleep(0.01)
                await trio.sleep(0.5)
                os.kill(spawner.server.popen.pid, signal.SIGKILL)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill_the_server_while_a_worker_runs)
                during = await run_evaluation(plan_for(root, "during", slow, 10.0), spawner, dict(os.environ))
            after = await run_evaluation(plan_for(root, "after", synthetic_kernel(100.0)), spawner, dict(os.environ))
        print(json.dumps({"during": [during.status.value, during.reason, during.worker.exit_code],
                          "after": [after.status.value, after.reason], "notices": notices}))

    trio.run(main)
""")


def test_server_dying_during_an_evaluation_ends_that_worker_and_the_next_starts_fresh(tmp_path):
    """The worker's PID-namespace keeper watches its parent, the server: the namespace ends with the server,
    so the evaluation in flight ends crashed (never hangs), its status still arrives, nothing is left."""
    completed = subprocess.run([sys.executable, "-c", SERVER_DIES_MID_EVALUATION, str(tmp_path)], capture_output=True,
                               text=True, timeout=120, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert completed.returncode == 0, completed.stderr
    found = json.loads(completed.stdout)
    assert found["during"] == ["crashed", found["during"][1], -signal.SIGKILL]
    assert "killed by SIGKILL" in found["during"][1]
    assert found["after"][0] == "ok", found["after"]
    fallbacks = [notice for notice in found["notices"] if "fresh interpreter" in notice]
    assert len(fallbacks) == 1 and "killed by SIGKILL" in fallbacks[0]
    assert processes_of_run(tmp_path) == []


ORCHESTRATOR = textwrap.dedent("""
    import os, sys, trio
    from pathlib import Path
    from orchestrator.worker.forkserver import make_spawner

    async def main():
        scratch = Path(sys.argv[1])
        async with make_spawner("forkserver", parent_env=dict(os.environ), scratch=scratch) as spawner:
            await spawner.wait_ready()
            print(spawner.server.popen.pid, flush=True)
            await trio.sleep(600)

    trio.run(main)
""")


def test_server_dies_when_the_orchestrator_dies(tmp_path):
    orchestrator = subprocess.Popen([sys.executable, "-c", ORCHESTRATOR, str(tmp_path / "server")],
                                    stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    try:
        assert orchestrator.stdout is not None
        server = psutil.Process(int(orchestrator.stdout.readline()))
        assert server.ppid() == orchestrator.pid
    finally:
        orchestrator.kill()
        orchestrator.wait()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not has_exited(server):
        time.sleep(0.05)
    assert has_exited(server)


def has_exited(process: psutil.Process) -> bool:
    """Gone, or a zombie (re-parented to a subreaper that has not reaped it yet)."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
