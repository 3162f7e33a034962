"""`--engine dask`: jobs run as tasks on a real Dask LocalCluster (two worker processes on 127.0.0.1)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.batch.conftest import (
    FASTER,
    GPU_REPORTING_HARNESS,
    SLOWER,
    jobs_by_id,
    make_bundle,
    occupancy,
    read_summary,
    visible_devices_seen,
    write_manifest,
)
from tests.conftest import run_cli

distributed = pytest.importorskip("distributed")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


class Cluster:
    """A Dask cluster on 127.0.0.1 started the way docs/batch.md tells a user to: `dask scheduler` and
    `dask worker` processes (their own sessions, ended by process group), never children of this test
    process's own multiprocessing (a LocalCluster leaves its resource tracker behind as our child)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.processes: list[subprocess.Popen[bytes]] = []
        self.scheduler_address = ""

    def _start(self, module: str, *args: str, env: dict[str, str] | None = None, log: str) -> None:
        with open(self.directory / log, "wb") as output:
            self.processes.append(subprocess.Popen(
                [sys.executable, "-m", f"distributed.cli.{module}", *args], stdout=output, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, env={**os.environ, **(env or {})}))

    def start(self, workers: list[dict[str, str]]) -> Cluster:
        scheduler_file = self.directory / "scheduler.json"
        self._start("dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                    "--scheduler-file", str(scheduler_file), log="scheduler.log")
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.scheduler_address = json.loads(scheduler_file.read_text())["address"]
        for index, worker in enumerate(workers):
            resources = ["--resources", worker["resources"]] if "resources" in worker else []
            self._start("dask_worker", self.scheduler_address, "--host", "127.0.0.1", "--nworkers", "1",
                        "--nthreads", worker.get("nthreads", "1"), "--no-dashboard", *resources,
                        env=worker.get("env"), log=f"worker{index}.log")
        with distributed.Client(self.scheduler_address, timeout=60) as client:
            client.wait_for_workers(len(workers), timeout=120)
        return self

    def stop(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for process in self.processes:
            process.wait(timeout=30)


@pytest.fixture
def cluster(tmp_path):
    running = Cluster(tmp_path).start([{}, {}])
    yield running
    running.stop()


def test_jobs_run_on_cluster_workers_and_the_summary_is_assembled(tmp_path, cluster):
    jobs = [make_bundle(tmp_path, "faster", [FASTER]), make_bundle(tmp_path, "slower", [SLOWER]),
            make_bundle(tmp_path, "broken-bundle", [FASTER], cases="[]"),
            make_bundle(tmp_path, "needs-gpu", [FASTER], backend="cuda")]
    out = tmp_path / "out"
    run = run_cli("batch", write_manifest(tmp_path, jobs), "--output-dir", out, "--engine", "dask",
                  "--scheduler", cluster.scheduler_address, timeout=200)
    assert run.returncode == 5, run.stderr
    summary = read_summary(out)
    assert run.result == summary and summary["engine"] == "dask" and summary["exit_code"] == 5
    by_id = jobs_by_id(summary)
    assert {job_id: job["status"] for job_id, job in by_id.items()} == {
        "faster": "improved", "slower": "no_improvement", "broken-bundle": "failed", "needs-gpu": "failed"}
    assert 1.9 < by_id["faster"]["speedup"] < 2.1
    assert "cases" in by_id["broken-bundle"]["error"]
    # no worker declared --resources GPU=1: the GPU job is refused, not left waiting forever
    assert "no Dask worker offers one" in by_id["needs-gpu"]["error"] and by_id["needs-gpu"]["exit_code"] is None
    for job_id in ("faster", "slower", "broken-bundle"):
        job = by_id[job_id]
        assert (job["attempts"], job["node"], job["gpu"]) == (1, socket.gethostname(), None), job_id
        assert json.loads((out / "jobs" / f"{job_id}.json").read_text())["exit_code"] == job["exit_code"]
        assert (out / "jobs" / job_id / "run.json").exists() or job_id == "broken-bundle"
    # each start was recorded when the worker announced it, before the job's end
    # each start was recorded when its worker announced it: both workers' jobs were running at once
    assert occupancy(run.stderr)[0] == 2


@pytest.fixture
def gpu_cluster(tmp_path):
    """Two GPU workers as docs/batch.md says to start them: each pinned with CUDA_VISIBLE_DEVICES and declaring
    GPU=1. Each has two threads, so only the resource keeps a second GPU job off a busy worker."""
    running = Cluster(tmp_path).start([{"nthreads": "2", "resources": "GPU=1", "env": {"CUDA_VISIBLE_DEVICES": str(i)}}
                                       for i in range(2)])
    yield running
    running.stop()


def test_gpu_jobs_take_one_gpu_worker_each(tmp_path, gpu_cluster):
    jobs = [make_bundle(tmp_path, f"gpu-{i}", [FASTER], backend="cuda", harness=GPU_REPORTING_HARNESS)
            for i in range(3)]
    jobs.append(make_bundle(tmp_path, "cpu", [FASTER], harness=GPU_REPORTING_HARNESS))
    out = tmp_path / "out"
    run = run_cli("batch", write_manifest(tmp_path, jobs), "--output-dir", out, "--engine", "dask",
                  "--scheduler", gpu_cluster.scheduler_address, timeout=200)
    assert run.returncode == 0, run.stderr
    by_id = jobs_by_id(run.result)
    for i in range(3):
        job = by_id[f"gpu-{i}"]
        assert job["gpu"] in ("0", "1") and visible_devices_seen(out / "jobs" / f"gpu-{i}.json") == {job["gpu"]}
    assert by_id["cpu"]["gpu"] is None and visible_devices_seen(out / "jobs" / "cpu.json") == {""}
    assert not occupancy(run.stderr)[1]  # never two jobs on one GPU worker
