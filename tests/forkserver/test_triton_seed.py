"""The run's trusted build of Triton's CUDA driver module (orchestrator/worker/triton_seed.py): each worker
starts with its own copy in its private Triton cache, a copy it may change without touching the seed or
the next worker's. Real processes: the build child, and workers started through the real spawners."""

from __future__ import annotations

import ctypes.util
import os
import sys
import uuid
from pathlib import Path

import pytest
import trio

from orchestrator.worker.environment import build_worker_environment, make_scratch_dirs
from orchestrator.worker.forkserver import make_spawner
from orchestrator.worker.process import SubprocessSpawner, WorkerLaunch
from orchestrator.worker.triton_seed import SeededSpawner, build_seed

pytestmark = pytest.mark.timeout(300)

# Reads the seeded module from its own cache, then overwrites it: what a hostile candidate could do.
READ_THEN_OVERWRITE = """
import os, pathlib
path = pathlib.Path(os.environ["TRITON_CACHE_DIR"]) / "0a1b" / "cuda_utils.so"
print(path.read_bytes().decode())
path.write_bytes(b"poisoned")
"""


def launch(scratch: Path, argv: list[str]) -> WorkerLaunch:
    make_scratch_dirs(scratch)
    token = uuid.uuid4().hex
    env, _ = build_worker_environment(dict(os.environ), None, scratch=scratch, token=token)
    return WorkerLaunch(argv=argv, env=env, cwd=scratch, log_path=scratch / "worker.log", token=token)


async def output_of(spawner, work: WorkerLaunch) -> str:
    spawned = await spawner.spawn(work)
    chunks = []
    async for chunk in spawned.output:
        chunks.append(chunk)
    await spawned.process.wait()
    await spawned.protocol.aclose()
    return b"".join(chunks).decode()


def test_each_worker_gets_its_own_copy_of_the_seed(tmp_path):
    seed = tmp_path / "seed"
    (seed / "0a1b").mkdir(parents=True)
    (seed / "0a1b" / "cuda_utils.so").write_bytes(b"trusted build")
    spawner = SeededSpawner(SubprocessSpawner(), seed)
    argv = [sys.executable, "-c", READ_THEN_OVERWRITE]

    async def main() -> tuple[str, str]:
        first = await output_of(spawner, launch(tmp_path / "w1", argv))
        second = await output_of(spawner, launch(tmp_path / "w2", argv))
        return first, second

    first, second = trio.run(main)
    assert first.strip() == "trusted build"
    assert second.strip() == "trusted build"  # the first worker's overwrite stayed in its own cache
    assert (seed / "0a1b" / "cuda_utils.so").read_bytes() == b"trusted build"
    assert (tmp_path / "w1" / "triton_cache" / "0a1b" / "cuda_utils.so").read_bytes() == b"poisoned"


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="this host has a CUDA driver library")
def test_without_a_cuda_driver_there_is_no_seed_and_the_spawner_says_why(tmp_path):
    built = trio.run(lambda: build_seed(sys.executable, dict(os.environ), tmp_path / "seed"))
    assert built.cache is None
    assert built.reason.startswith("no CUDA driver module to seed (exit 1): ")

    events: list[str] = []

    async def main() -> type:
        async with make_spawner("fresh", parent_env=dict(os.environ), scratch=tmp_path / "server",
                                notify=events.append, triton_seed=True) as spawner:
            return type(spawner)

    assert trio.run(main) is SubprocessSpawner  # unwrapped: workers build what they need, as before
    assert len(events) == 1 and events[0].startswith("triton_seed status=none reason='no CUDA driver module")
