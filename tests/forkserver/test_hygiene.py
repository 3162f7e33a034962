"""20 evaluations in a row through `run_evaluation` with forked workers: every status as with fresh workers, no
fd leaks, no zombies, no survivors, and the fork server left with no child. Modelled on
tests/faults/test_evaluation_hygiene.py, whose rotation of honest and faulty kernels it reuses (two rounds).
"""

from __future__ import annotations

import os

import psutil
import pytest
import trio

from orchestrator.worker.evaluation import run_evaluation
from orchestrator.worker.forkserver import ForkServerSpawner, make_spawner
from protocol.results import Evaluation
from tests.faults.corpus import processes_of_run
from tests.faults.test_evaluation_hygiene import KINDS, LOG_LIMIT_BYTES, Kind, make_plan, open_fds

EVALUATIONS = 20


def children() -> list[int]:
    """Our unreaped descendants, zombies included (psutil lists them as children)."""
    return sorted(child.pid for child in psutil.Process().children(recursive=True))


@pytest.mark.timeout(300)
def test_twenty_forked_evaluations_leak_no_fds_and_leave_no_processes(tmp_path):
    (tmp_path / "logs").mkdir()
    results: list[tuple[Kind, Evaluation]] = []
    snapshots: dict[str, tuple[list[str], list[int]]] = {}
    found: dict[str, object] = {}

    async def main() -> None:
        async with make_spawner("forkserver", parent_env=dict(os.environ), scratch=tmp_path / "server",
                                log_path=tmp_path / "server.log") as spawner:
            assert isinstance(spawner, ForkServerSpawner) and spawner.server is not None
            # one evaluation first, so trio's own lazily opened fds (epoll, wakeup socket) are in the baseline
            await run_evaluation(make_plan(tmp_path, 999, KINDS[0]), spawner, dict(os.environ))
            snapshots["before"] = (open_fds(), children())
            for index in range(EVALUATIONS):
                kind = KINDS[index % len(KINDS)]
                results.append((kind, await run_evaluation(make_plan(tmp_path, index, kind), spawner,
                                                           dict(os.environ))))
            snapshots["after"] = (open_fds(), children())
            found["server_children"] = psutil.Process(spawner.server.popen.pid).children(recursive=True)
            found["statistics"] = spawner.statistics()
            found["server"] = spawner.server.popen
        snapshots["closed"] = (open_fds(), children())

    trio.run(main)

    unexpected = [(kind.name, e.status.value, e.reason) for kind, e in results if e.status.value != kind.status]
    assert unexpected == []
    assert found["statistics"]["forked"] == EVALUATIONS + 1 and found["statistics"]["fresh"] == 0
    fds_before, children_before = snapshots["before"]
    fds_after, children_after = snapshots["after"]
    assert fds_after == fds_before
    assert children_after == children_before == [found["server"].pid]  # no worker, no zombie
    assert found["server_children"] == []
    assert processes_of_run(tmp_path) == []
    escapees = [e.worker.leftover_processes_killed for kind, e in results if kind.name == "setsid_escapee"]
    assert escapees == [1] * (EVALUATIONS // len(KINDS))
    logs = sorted((tmp_path / "logs").glob("*-stdout_flood.log"))
    assert logs and all(log.stat().st_size <= LOG_LIMIT_BYTES + 256 for log in logs)
    # closing the spawner kills and reaps the server and closes its control socket
    fds_closed, children_closed = snapshots["closed"]
    assert children_closed == []
    assert len(fds_closed) == len(fds_before) - 1
    assert found["server"].returncode == -9
