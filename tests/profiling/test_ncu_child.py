"""The judge's ncu child: it replays the judge's record with the frozen harness's inputs and never takes a
candidate's source (its spec has no kernel file); a spec it cannot use ends with a quotable line and a status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import PROJECT_ROOT, VECTOR_ADD


def _run(spec: dict | None, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "spec.json"
    if spec is not None:
        path.write_text(json.dumps(spec))
    return subprocess.run([sys.executable, "-m", "sandbox_worker.judged.ncu_child", "--spec", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT_ROOT)})


def test_a_spec_without_the_judges_record_or_kernels_is_refused_before_anything_runs(tmp_path):
    missing = _run(None, tmp_path)
    assert missing.returncode == 2 and "[tlx-ncu-replay] error: cannot read replay spec" in missing.stderr
    record = tmp_path / "record.json"
    record.write_text("{}")
    no_kernels = _run({"harness_path": str(VECTOR_ADD / "harness.py"), "record_path": str(record),
                       "kernels_dir": str(tmp_path / "absent"), "kernels": []}, tmp_path)
    assert no_kernels.returncode == 2 and "kernels_dir is missing or not a folder" in no_kernels.stderr


def test_a_harness_without_judge_cannot_drive_the_judged_replay(tmp_path):
    harness = tmp_path / "harness.py"
    harness.write_text("def build(source, target):\n    return {'success': True}\n")
    record = tmp_path / "record.json"
    record.write_text("{}")
    run = _run({"harness_path": str(harness), "record_path": str(record), "kernels_dir": str(tmp_path),
                "kernels": [], "case": {"case_id": "a", "parameters": {}}, "seed": 7}, tmp_path)
    assert run.returncode == 4, run.stderr
    assert "the harness declares no JUDGE" in run.stderr


def test_the_child_takes_the_judges_fresh_triton_cache_not_the_workers(tmp_path):
    # the worker's Triton cache is writable by the candidate process; the judge hands the child a fresh copy of
    # the files it vouches for, and everything the child loads (the harness included) sees only that copy
    harness = tmp_path / "harness.py"
    seen = tmp_path / "seen.txt"
    harness.write_text(f"import os, pathlib\npathlib.Path({str(seen)!r}).write_text(os.environ['TRITON_CACHE_DIR'])\n")
    record = tmp_path / "record.json"
    record.write_text("{}")
    fresh = tmp_path / "judge-copy"
    fresh.mkdir()
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"harness_path": str(harness), "record_path": str(record), "kernels_dir": str(tmp_path),
                                "kernels": [], "triton_cache_dir": str(fresh), "case": {"case_id": "a"}}))
    run = subprocess.run([sys.executable, "-m", "sandbox_worker.judged.ncu_child", "--spec", str(path)],
                         capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT_ROOT),
                              "TRITON_CACHE_DIR": str(tmp_path / "worker-cache")})
    assert run.returncode == 4, run.stderr  # no JUDGE: it stops after importing the harness
    assert seen.read_text() == str(fresh)
