"""The replay child ncu profiles: it rebuilds with the harness and calls the entry point, in a real subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

HARNESS = '''
import json
from sandbox_worker.harness_kit.context import current_phase, evaluation_seed

LOG = {log!r}

def build(kernel_source, target):
    if "FAIL" in kernel_source:
        return {{"success": False, "artifact": None, "diagnostics": "syntax error in candidate"}}
    return {{"source": kernel_source.strip(), "target": target}}

def run_case(artifact, case):
    with open(LOG, "a") as stream:
        stream.write(json.dumps({{"artifact": artifact, "case": case, "seed": evaluation_seed(),
                                  "phase": current_phase()}}) + "\\n")
'''


def _replay(tmp_path: Path, *, kernel: str = "KERNEL", **overrides) -> tuple[subprocess.CompletedProcess, Path]:
    log = tmp_path / "calls.jsonl"
    harness = tmp_path / "harness.py"
    harness.write_text(HARNESS.format(log=str(log)))
    kernel_path = tmp_path / "kernel.py"
    kernel_path.write_text(kernel)
    spec = {"harness_path": str(harness), "kernel_path": str(kernel_path), "target": {"backend": "cuda"},
            "case": {"case_id": "c1", "parameters": {"n": 4}}, "seed": 77, "entry": "run_case",
            "warmup_calls": 2, "profiled_calls": 3, "gate": "none", **overrides}
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    completed = subprocess.run([sys.executable, "-m", "sandbox_worker.harness_kit.ncu_replay", "--spec", str(spec_path)],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    return completed, log


def test_replay_builds_and_calls_the_entry(tmp_path):
    completed, log = _replay(tmp_path)
    assert completed.returncode == 0, completed.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 5  # 2 warm-up + 3 profiled
    assert calls[0] == {"artifact": {"source": "KERNEL", "target": {"backend": "cuda"}},
                        "case": {"case_id": "c1", "parameters": {"n": 4}}, "seed": 77, "phase": "ncu_replay"}
    assert "[tlx-ncu-replay] ran 5 calls" in completed.stderr


@pytest.mark.parametrize(("overrides", "kernel", "status", "message"), [
    ({}, "FAIL", 3, "harness build failed"),
    ({"entry": "no_such_entry"}, "KERNEL", 4, "no_such_entry"),
    ({"kernel_path": "/nonexistent/kernel.py"}, "KERNEL", 2, "kernel_path"),
])
def test_replay_failures_have_distinct_statuses(tmp_path, overrides, kernel, status, message):
    completed, _ = _replay(tmp_path, kernel=kernel, **overrides)
    assert completed.returncode == status
    assert "[tlx-ncu-replay] error:" in completed.stderr and message in completed.stderr


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU host can open the gate")
def test_profiler_gate_needs_a_cuda_device(tmp_path):
    completed, log = _replay(tmp_path, gate="cuda_profiler_api")
    # CPU-only CI: the warm-up calls run, then opening the gate fails with a clear message
    assert completed.returncode == 5, completed.stderr
    assert "[tlx-ncu-replay] error:" in completed.stderr
    assert len(log.read_text().splitlines()) == 2
