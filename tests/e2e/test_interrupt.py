"""Ctrl-C: exit 130, a JSON document on stdout, partial artifacts kept, no worker left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import PROJECT_ROOT, synthetic_args, synthetic_kernel, write_candidates

pytestmark = pytest.mark.timeout(120)


def _is_worker(process: psutil.Process) -> bool:
    try:
        return "sandbox_worker" in " ".join(process.cmdline())
    except psutil.Error:
        return False


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# "background": started as a shell without job control starts `... &` in a script, with SIGINT ignored
@pytest.mark.parametrize("started", ["foreground", "background"])
def test_sigint_during_an_evaluation_exits_130_and_cleans_up(tmp_path, out_dir, started):
    hang = synthetic_kernel(10.0, body="import time; time.sleep(3600)")
    replay = write_candidates(tmp_path / "cands", [hang])
    argv = [sys.executable, "-m", "orchestrator.cli", *map(str, synthetic_args(out_dir, "--provider", "replay",
                                                                             "--replay-dir", replay))]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}, stdin=subprocess.DEVNULL,
                               preexec_fn=_ignore_sigint if started == "background" else None)
    deadline = time.monotonic() + 60
    log = out_dir / "live.log"
    while time.monotonic() < deadline and not (log.exists() and "r001-c000 status=artifacts" in log.read_text()):
        time.sleep(0.2)
    workers: list[psutil.Process] = []
    while time.monotonic() < deadline and not workers:  # wait for the hanging candidate's worker
        workers = [p for p in psutil.Process(process.pid).children(recursive=True) if _is_worker(p)]
        time.sleep(0.2)
    assert workers, "expected a running worker"
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    document = json.loads(stdout)
    assert document["stopping_reason"] == "interrupted" and document["exit_code"] == 130
    assert (out_dir / "experiments" / "r001-c000" / "kernel.py").exists()
    assert "run_interrupted" in (out_dir / "journal.jsonl").read_text()
    time.sleep(0.5)
    def alive(p: psutil.Process) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    assert not [p for p in workers if alive(p)]
