"""Starting one real worker up to `ready` through a spawner, the way `run_evaluation` does, and ending it.

`start_to_ready` is the number the fork server exists to cut: from asking the spawner for a worker to its `ready` event
(hello, setup with every isolation layer, harness import).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import trio

from orchestrator.worker.environment import build_worker_environment, make_scratch_dirs
from orchestrator.worker.process import SpawnedWorker, Spawner, WorkerConnection, WorkerLaunch
from orchestrator.worker.process_tree import kill_tree
from protocol.bundle import load_target_file
from protocol.worker import (
    FinishedEvent,
    HelloEvent,
    IsolationConfig,
    ReadyEvent,
    SetupCommand,
    ShutdownCommand,
)

WORKER_ARGV = ("-s", "-m", "sandbox_worker")
# The harness functions of a bundle whose tests look only at the worker: everything builds, verifies and times alike.
PASSING_HARNESS_FUNCTIONS = """
def build(kernel_source, target):
    return {"success": True, "artifact": None}

def verify(artifact, case):
    return True

def benchmark(artifact, case, repetitions):
    return [1.0] * repetitions
"""
READY_SECONDS = 120.0


@dataclass
class Bundle:
    """The files a worker's setup names."""

    harness: Path
    kernel: Path
    target: Path

    @classmethod
    def in_directory(cls, directory: Path) -> Bundle:
        return cls(directory / "harness.py", directory / "kernel.py", directory / "target.json")


@dataclass
class StartedWorker:
    spawned: SpawnedWorker
    connection: WorkerConnection
    ready: ReadyEvent
    launch: WorkerLaunch
    seconds: float  # start to ready


def worker_launch(python: str, parent_env: dict[str, str], bundle: Bundle, scratch: Path) -> WorkerLaunch:
    """What run_evaluation builds for one worker: the allow-listed environment plus the target's."""
    make_scratch_dirs(scratch)
    token = uuid.uuid4().hex
    target = load_target_file(bundle.target)
    env, _refused = build_worker_environment(parent_env, target.environment, scratch=scratch, token=token)
    return WorkerLaunch(argv=[python, *WORKER_ARGV], env=env, cwd=scratch, log_path=scratch / "worker.log",
                        token=token)


async def start_to_ready(spawner: Spawner, launch: WorkerLaunch, bundle: Bundle) -> StartedWorker:
    """Spawn, handshake and set up one worker (standard isolation, writable scratch); fails the test if the
    worker does not reach `ready` within READY_SECONDS."""
    target = load_target_file(bundle.target)
    with trio.fail_after(READY_SECONDS):
        started = time.perf_counter()
        spawned = await spawner.spawn(launch)
        connection = WorkerConnection(spawned)
        hello = await connection.receive_event()
        assert isinstance(hello, HelloEvent), hello
        await connection.send(SetupCommand(
            run_id="forkserver-test", experiment_id="e0", harness_path=str(bundle.harness),
            kernel_path=str(bundle.kernel), target=target.model_dump(),
            isolation=IsolationConfig(mode="standard", scratch_dir=str(launch.cwd), writable_dirs=[str(launch.cwd)])))
        ready = await connection.receive_event()
        seconds = time.perf_counter() - started
    assert isinstance(ready, ReadyEvent), ready
    return StartedWorker(spawned, connection, ready, launch, seconds)


async def stop(worker: StartedWorker) -> int | None:
    """Shutdown, `finished`, then the same cleanup as run_evaluation; returns the worker's exit status."""
    with trio.move_on_after(30.0):
        await worker.connection.send(ShutdownCommand())
        finished = await worker.connection.receive_event()
        assert isinstance(finished, FinishedEvent), finished
        await worker.spawned.process.wait()
    with trio.CancelScope(shield=True):
        await kill_tree(worker.spawned.process, worker.launch.token)  # type: ignore[arg-type]
        await worker.spawned.protocol.aclose()
        await worker.spawned.output.aclose()
    return worker.spawned.process.returncode
