"""`tlx-agent batch` end to end: real optimize jobs on the synthetic bundle, a crash and a kill -9 included."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from protocol.batch import BatchSummary
from tests.batch.conftest import (
    ABORTS_AT_IMPORT,
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
from tests.conftest import PROJECT_ROOT, run_cli, synthetic_kernel

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_six_jobs_one_broken_bundle_one_crashing_kernel(tmp_path):
    jobs = [
        make_bundle(tmp_path, "faster", [FASTER]),
        make_bundle(tmp_path, "crashing-candidate", [ABORTS_AT_IMPORT, FASTER]),
        make_bundle(tmp_path, "slower", [SLOWER]),
        make_bundle(tmp_path, "broken-bundle", [FASTER], cases="[{not json"),
        make_bundle(tmp_path, "crashing-kernel", [FASTER], kernel=ABORTS_AT_IMPORT),
        make_bundle(tmp_path, "faster-again", [synthetic_kernel(40.0)]),
    ]
    out = tmp_path / "out"
    run = run_cli("batch", write_manifest(tmp_path, jobs), "--output-dir", out, "--parallel", "2", timeout=200)
    assert run.returncode == 5, run.stderr  # some improved
    summary = read_summary(out)
    assert run.result == summary  # stdout is the final batch.json
    BatchSummary.model_validate(summary)
    assert summary["exit_code"] == 5 and summary["finished"] and summary["engine"] == "local"
    by_id = jobs_by_id(summary)
    assert {job_id: (job["status"], job["exit_code"]) for job_id, job in by_id.items()} == {
        "faster": ("improved", 0), "crashing-candidate": ("improved", 0), "slower": ("no_improvement", 2),
        "broken-bundle": ("failed", 1), "crashing-kernel": ("failed", 1), "faster-again": ("improved", 0)}
    assert 1.9 < by_id["faster"]["speedup"] < 2.1 and 2.4 < by_id["faster-again"]["speedup"] < 2.6
    assert "cases.json is not valid JSON" in by_id["broken-bundle"]["error"]
    assert "baseline kernel failed" in by_id["crashing-kernel"]["error"] and "SIGABRT" in by_id["crashing-kernel"]["error"]
    assert by_id["faster"]["error"] is None and by_id["slower"]["error"] is None
    for job_id, job in by_id.items():
        assert (job["attempts"], job["gpu"], job["node"]) == (1, None, socket.gethostname()), job_id
        assert job["wall_seconds"] > 0 and job["output_dir"] == str(out / "jobs" / job_id)
        document = json.loads((out / "jobs" / f"{job_id}.json").read_text())  # optimize's own stdout
        assert document["exit_code"] == job["exit_code"]
        assert (out / "jobs" / f"{job_id}.log").read_text().startswith("[tlx-agent]")
    # the crashing candidate was that job's rejected experiment, not the job's end
    crashed = json.loads((out / "jobs" / "crashing-candidate.json").read_text())  # the job's stdout summary
    decisions = {e["experiment_id"]: e for e in crashed["experiments"]}
    assert "SIGABRT" in decisions["r001-c000"]["reason"] and crashed["winner_experiment_id"] == "r001-c001"
    assert occupancy(run.stderr)[0] == 2  # --parallel 2 on a CPU machine


def test_gpu_jobs_are_pinned_one_per_gpu(tmp_path):
    """Two listed GPUs, three jobs whose target needs one and a CPU job: the harness reports what it saw."""
    assert "visible" in GPU_REPORTING_HARNESS
    jobs = [make_bundle(tmp_path, f"gpu-{i}", [FASTER], backend="cuda", harness=GPU_REPORTING_HARNESS)
            for i in range(3)]
    jobs.append(make_bundle(tmp_path, "cpu", [FASTER], harness=GPU_REPORTING_HARNESS))
    out = tmp_path / "out"
    run = run_cli("batch", write_manifest(tmp_path, jobs), "--output-dir", out, "--gpus", "0,1", timeout=200)
    assert run.returncode == 0, run.stderr
    by_id = jobs_by_id(run.result)
    for job_id, job in by_id.items():
        seen = visible_devices_seen(out / "jobs" / f"{job_id}.json")
        if job_id == "cpu":
            assert job["gpu"] is None and seen == {""}, job_id  # a CPU lane hides the GPUs
        else:
            assert job["gpu"] in ("0", "1") and seen == {job["gpu"]}, job_id
    assert {by_id[f"gpu-{i}"]["gpu"] for i in range(3)} == {"0", "1"}
    most, clashes = occupancy(run.stderr)
    assert not clashes and most <= 3  # two GPUs and one CPU lane


def _tree_fingerprint(paths: list[Path]) -> dict[str, tuple[int, str]]:
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*"))) if f.is_file()]
    return {str(f): (f.stat().st_mtime_ns, hashlib.sha256(f.read_bytes()).hexdigest()) for f in files}


def _wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _summary_or_none(out: Path) -> dict | None:
    try:
        return read_summary(out)
    except (OSError, ValueError):
        return None


def test_kill_9_then_resume_reruns_only_the_interrupted_job(tmp_path):
    sleepy = synthetic_kernel(50.0, prelude="import time\ntime.sleep(6)\n")  # slow enough to be killed in
    jobs = [make_bundle(tmp_path, "first", [FASTER]), make_bundle(tmp_path, "second", [SLOWER]),
            make_bundle(tmp_path, "sleepy", [sleepy])]
    manifest, out = write_manifest(tmp_path, jobs), tmp_path / "out"
    argv = [sys.executable, "-m", "orchestrator.cli", "batch", str(manifest), "--output-dir", str(out)]
    batch = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}, start_new_session=True)
    try:
        def sleepy_is_running() -> bool:
            summary = _summary_or_none(out)
            sleepy_job = jobs_by_id(summary)["sleepy"] if summary else {"status": "pending"}
            assert sleepy_job["status"] in ("pending", "running"), f"the job ended before the kill: {sleepy_job}"
            return sleepy_job["status"] == "running" and (out / "jobs" / "sleepy" / "live.log").exists()

        _wait_for(sleepy_is_running, 150, "the third job to run")
        descendants = psutil.Process(batch.pid).children(recursive=True)
        os.killpg(batch.pid, signal.SIGKILL)
        batch.wait(timeout=30)
    finally:
        if batch.poll() is None:
            batch.kill()
        batch.stderr.close()
    for process in descendants:  # a worker in a session of its own outlives the group kill; end it by its id
        with contextlib.suppress(psutil.Error):
            process.kill()
    killed = jobs_by_id(read_summary(out))
    assert killed["first"]["status"] == "improved" and killed["second"]["status"] == "no_improvement"
    assert killed["sleepy"]["status"] == "running" and killed["sleepy"]["attempts"] == 1
    assert read_summary(out)["finished"] is None
    finished_outputs = [out / "jobs" / name for name in ("first", "first.json", "first.log", "second",
                                                        "second.json", "second.log")]
    before = _tree_fingerprint(finished_outputs)

    refused = run_cli("batch", manifest, "--output-dir", out)
    assert refused.returncode == 1 and "--resume" in refused.result["error"]
    resumed = run_cli("batch", manifest, "--output-dir", out, "--resume", timeout=150)
    assert resumed.returncode == 5, resumed.stderr
    assert "kept=2" in resumed.stderr and "job=first status=running" not in resumed.stderr
    assert _tree_fingerprint(finished_outputs) == before  # finished jobs not run again, not touched
    by_id = jobs_by_id(resumed.result)
    assert resumed.result == read_summary(out) and resumed.result["exit_code"] == 5
    assert (by_id["sleepy"]["status"], by_id["sleepy"]["attempts"]) == ("improved", 2)
    assert (by_id["first"]["attempts"], by_id["second"]["attempts"]) == (1, 1)
    # the interrupted attempt's outputs were moved aside, whole
    aside = out / "jobs" / "sleepy.attempt-1"
    assert (aside / "live.log").exists() and (out / "jobs" / "sleepy.attempt-1.log").exists()
    assert json.loads((out / "jobs" / "sleepy.json").read_text())["exit_code"] == 0


def test_sigterm_interrupts_running_jobs_and_leaves_them_for_resume(tmp_path):
    sleepy = synthetic_kernel(50.0, prelude="import time\ntime.sleep(30)\n")
    manifest = write_manifest(tmp_path, [make_bundle(tmp_path, "sleepy", [sleepy]),
                                         make_bundle(tmp_path, "later", [FASTER])])
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "orchestrator.cli", "batch", str(manifest), "--output-dir", str(out)]
    batch = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    _wait_for(lambda: (out / "jobs" / "sleepy" / "experiments" / "r001-c000").exists(), 120, "the sleepy candidate")
    descendants = psutil.Process(batch.pid).children(recursive=True)
    batch.send_signal(signal.SIGTERM)
    stdout, stderr = batch.communicate(timeout=60)
    assert batch.returncode == 130, stderr
    assert json.loads(stdout)["exit_code"] == 130 and "--resume" in json.loads(stdout)["error"]
    by_id = jobs_by_id(read_summary(out))
    assert (by_id["sleepy"]["status"], by_id["later"]["status"]) == ("running", "pending")
    assert read_summary(out)["exit_code"] == 130
    # the job was interrupted the way Ctrl-C interrupts optimize: its own interrupted document, no process left
    assert json.loads((out / "jobs" / "sleepy.json").read_text())["stopping_reason"] == "interrupted"
    time.sleep(0.5)
    assert not [p for p in descendants if _alive(p)]
