"""Finding and ending what is left of finished evaluations (orchestrator/worker/process_tree.py), against real
leftover processes: a worker's escapee in its PID namespace, with an empty environment, and a process that
keeps coming back."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest
import trio

from orchestrator.worker.process_tree import end_leftovers, find_leftovers, pid_namespace

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# A worker (processes layer on) that leaves an escapee behind: setsid, double fork, execve with an empty
# environment into `sleep`, then the worker exits 0. Its relay exits too; keeper and pid 1 stay with the escapee.
LEAVES_AN_ESCAPEE = textwrap.dedent("""
    import json, os, sys
    from sandbox_worker.isolation import layers
    applied = layers.apply_isolation({"mode": "standard", "scratch_dir": os.getcwd(), "network": False})
    print(json.dumps({"processes": applied.statuses["processes"]}), flush=True)
    if applied.pid_namespace is None:
        sys.exit(0)
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() == 0:
            os.dup2(ready_w, 3)
            os.execve("/bin/sh", ["/bin/sh", "-c", "echo x >&3; exec sleep " + sys.argv[1]], {})
        os._exit(0)
    os.waitpid(child, 0)
    os.close(ready_w)
    os.read(ready_r, 1)
""")


def start_worker_with_escapee(scratch: Path, seconds: str) -> subprocess.Popen[str]:
    scratch.mkdir(parents=True, exist_ok=True)
    worker = subprocess.Popen([sys.executable, "-c", LEAVES_AN_ESCAPEE, seconds], stdout=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL, cwd=scratch, start_new_session=True,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(PROJECT_ROOT),
                                   "TLX_WORKER_SCRATCH": str(scratch)})
    assert worker.stdout is not None
    status = json.loads(worker.stdout.readline())["processes"]
    assert worker.wait(timeout=30) == 0
    if status != "active":
        pytest.skip(f"no PID namespace on this machine: {status}")
    return worker


def sleepers(seconds: str) -> list[int]:
    return [proc.pid for proc in psutil.process_iter(["cmdline"])
            if proc.info["cmdline"] == ["sleep", seconds] and proc.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.timeout(60)
def test_the_scan_finds_every_process_of_a_finished_worker_and_ending_them_leaves_none(tmp_path: Path) -> None:
    seconds = f"600.{uuid.uuid4().int % 10**6:06d}"  # marks this test's escapee
    scratch = tmp_path / "experiments" / "r001-c000" / "workers" / "0-candidate"
    worker = start_worker_with_escapee(scratch, seconds)
    try:
        (escapee,) = sleepers(seconds)
        # nothing of the worker's environment (sh adds PWD): neither its token nor its scratch
        assert [name for name in psutil.Process(escapee).environ() if name.startswith("TLX_")] == []
        found = find_leftovers({str(scratch): "r001-c000 candidate (0-candidate)"})
        by_pid = {leftover.pid: leftover for leftover in found}
        assert escapee in by_pid
        assert by_pid[escapee].evaluation == "r001-c000 candidate (0-candidate)"
        assert by_pid[escapee].command == f"sleep {seconds}"
        assert by_pid[escapee].pid_namespace not in (None, pid_namespace("self"))
        assert by_pid[escapee].describe() == (f"pid {escapee} (sleep {seconds}) from evaluation "
                                              "r001-c000 candidate (0-candidate)")
        # the rest is the worker's pid 1 and keeper, still in the worker's process group: nothing else of ours
        others = sorted(pid for pid in by_pid if pid != escapee)
        assert len(others) == 2 and all(os.getpgid(pid) == worker.pid for pid in others), found
        assert find_leftovers({str(tmp_path / "another-scratch"): "another evaluation"}) == []
        killed, alive = trio.run(end_leftovers, {str(scratch): "r001-c000 candidate (0-candidate)"})
        assert sorted(leftover.pid for leftover in killed) == sorted(by_pid)
        assert alive == []
        assert sleepers(seconds) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)


HYDRA = textwrap.dedent("""
    import os, subprocess, sys, time
    environment = {"TLX_WORKER_SCRATCH": sys.argv[1]}
    while True:
        subprocess.Popen(["sleep", sys.argv[2]], env=environment).wait()
""")


@pytest.mark.timeout(60)
def test_a_leftover_that_keeps_coming_back_is_reported_with_pid_command_and_evaluation(tmp_path: Path) -> None:
    """The hydra's head carries a finished worker's scratch; SIGKILL ends each head, its parent starts another,
    so a process of that evaluation is alive at the end of the bounded wait."""
    seconds = f"600.{uuid.uuid4().int % 10**6:06d}"
    scratch = str(tmp_path / "worker")
    hydra = subprocess.Popen([sys.executable, "-c", HYDRA, scratch, seconds], stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sleepers(seconds) and time.monotonic() < deadline:
            time.sleep(0.05)
        killed, alive = trio.run(lambda: end_leftovers({scratch: "r002-c001 candidate (0-candidate)"},
                                                       wait_seconds=0.5))
        assert killed and alive
        assert {leftover.pid for leftover in killed}.isdisjoint(leftover.pid for leftover in alive)
        assert all(leftover.describe().endswith(f"(sleep {seconds}) from evaluation r002-c001 candidate (0-candidate)")
                   for leftover in alive)
        assert hydra.poll() is None  # the parent carries no worker environment: never a leftover
    finally:
        hydra.kill()
        hydra.wait()
        for pid in sleepers(seconds):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(30)
def test_no_finished_workers_means_nothing_to_look_for() -> None:
    assert trio.run(end_leftovers, {}) == ([], [])
