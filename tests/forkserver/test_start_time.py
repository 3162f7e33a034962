"""Start to ready, fork server against fresh interpreter, on examples/vector_add (its harness imports torch and
triton, as every real bundle's does): the median of 5 each, printed, and the forked worker clearly faster
with the same isolation. scripts/bench_search.py measures the same on the GPU host (median of 20).
"""

from __future__ import annotations

import os
import statistics
import sys

import pytest
import trio

from orchestrator.worker.forkserver import ForkServerSpawner, make_spawner
from orchestrator.worker.process import SubprocessSpawner
from protocol.bundle import load_target_file
from tests.conftest import VECTOR_ADD
from tests.forkserver.workers import Bundle, StartedWorker, start_to_ready, stop, worker_launch

pytestmark = pytest.mark.slow

STARTS = 5


@pytest.mark.timeout(600)
def test_fork_server_reaches_ready_clearly_faster_than_a_fresh_interpreter(tmp_path):
    bundle = Bundle.in_directory(VECTOR_ADD)
    target_environment = load_target_file(bundle.target).environment
    seconds: dict[str, list[float]] = {"fresh": [], "forkserver": []}
    isolation: dict[str, list[dict[str, str]]] = {"fresh": [], "forkserver": []}

    async def one(kind: str, spawner: object, index: int) -> None:
        launch = worker_launch(sys.executable, dict(os.environ), bundle, tmp_path / f"{kind}-{index}")
        started: StartedWorker = await start_to_ready(spawner, launch, bundle)  # type: ignore[arg-type]
        seconds[kind].append(started.seconds)
        isolation[kind].append(started.ready.isolation)
        assert await stop(started) == 0

    async def main() -> None:
        async with make_spawner("forkserver", parent_env=dict(os.environ), scratch=tmp_path / "server",
                                target_environment=target_environment, log_path=tmp_path / "server.log") as spawner:
            assert isinstance(spawner, ForkServerSpawner)
            assert await spawner.wait_ready(), spawner.statistics()
            fresh = SubprocessSpawner()
            for index in range(STARTS):  # interleaved, so load on the machine hits both alike
                await one("fresh", fresh, index)
                await one("forkserver", spawner, index)
            assert spawner.statistics()["forked"] == STARTS

    trio.run(main)
    fresh, forked = statistics.median(seconds["fresh"]), statistics.median(seconds["forkserver"])
    print(f"\nstart to ready, median of {STARTS}: fresh interpreter {fresh:.3f} s, fork server {forked:.3f} s "
          f"({fresh / forked:.1f}x)\n  fresh: {[round(s, 3) for s in seconds['fresh']]}\n"
          f"  forked: {[round(s, 3) for s in seconds['forkserver']]}")
    assert forked * 3 < fresh
    assert isolation["forkserver"] == isolation["fresh"]  # each layer active in a forked worker iff in a fresh one
