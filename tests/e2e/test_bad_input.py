"""Bad input stops before any candidate: exit 1, one line naming the file and field, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import SYNTHETIC, run_cli, synthetic_args

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    directory = tmp_path / "bundle"
    shutil.copytree(SYNTHETIC, directory)
    return directory


def _args(bundle: Path, out: Path) -> list:
    args = synthetic_args(out, "--provider", "replay", "--replay-dir", bundle)
    for flag, name in (("--kernel", "kernel.py"), ("--harness", "harness.py"), ("--cases", "cases.json"),
                       ("--target", "target.json")):
        args[args.index(flag) + 1] = bundle / name
    return args


CASES = {
    "missing kernel": (lambda b: (b / "kernel.py").unlink(), "kernel.py does not exist"),
    "kernel is a directory": (lambda b: ((b / "kernel.py").unlink(), (b / "kernel.py").mkdir()), "is a directory"),
    "kernel syntax": (lambda b: (b / "kernel.py").write_text("def broken(:\n"), "not valid Python (line 1"),
    "missing harness": (lambda b: (b / "harness.py").unlink(), "harness.py does not exist"),
    "harness without benchmark": (
        lambda b: (b / "harness.py").write_text("def build(s, t):\n    return s\n\ndef verify(a, c):\n    return True\n"),
        "does not define benchmark"),
    "cases invalid JSON": (lambda b: (b / "cases.json").write_text("[{"), "cases.json is not valid JSON"),
    "cases not a list": (lambda b: (b / "cases.json").write_text("{}"), "must be a JSON list"),
    "cases empty": (lambda b: (b / "cases.json").write_text("[]"), "case list is empty"),
    "case unknown key": (
        lambda b: (b / "cases.json").write_text(json.dumps([{"case_id": "a", "parameters": {"n": 4}, "wieght": 1}])),
        "unknown key 'wieght'"),
    "case negative weight": (
        lambda b: (b / "cases.json").write_text(json.dumps([{"case_id": "a", "parameters": {"n": 4}, "weight": -1}])),
        "field 'weight' is invalid"),
    "case wrong type": (
        lambda b: (b / "cases.json").write_text(json.dumps([{"case_id": "a", "parameters": [1, 2]}])),
        "field 'parameters' is invalid"),
    "case missing id": (lambda b: (b / "cases.json").write_text(json.dumps([{"parameters": {"n": 4}}])),
                        "required field 'case_id' is missing"),
    "duplicate case ids": (
        lambda b: (b / "cases.json").write_text(json.dumps([{"case_id": "a", "parameters": {"n": 4}}] * 2)),
        "appears twice"),
    "target missing backend": (lambda b: (b / "target.json").write_text(json.dumps({"architecture": "x"})),
                               "required field 'backend' is missing"),
    "target unknown key": (
        lambda b: (b / "target.json").write_text(json.dumps({"backend": "cpu", "architecture": "x", "env": {}})),
        "unknown key 'env'"),
    "target environment wrong type": (
        lambda b: (b / "target.json").write_text(json.dumps({"backend": "cpu", "architecture": "x", "environment": []})),
        "field 'environment' is invalid"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_bundle_input_exits_1_with_one_line(name: str, bundle: Path, tmp_path: Path) -> None:
    breaker, expected = CASES[name]
    breaker(bundle)
    out = tmp_path / "out"
    run = run_cli(*_args(bundle, out))
    assert run.returncode == 1, run.stderr
    error_lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(error_lines) == 1, run.stderr
    assert expected in error_lines[0]
    assert "Traceback" not in run.stderr
    assert json.loads(run.stdout)["success"] is False
    assert not out.exists(), "nothing may be written for invalid input"


def test_bad_budget_file_and_flags(bundle: Path, tmp_path: Path) -> None:
    (bundle / "budget.json").write_text(json.dumps({"max_rounds": 0}))
    run = run_cli(*_args(bundle, tmp_path / "out"), "--budget", bundle / "budget.json")
    assert run.returncode == 1 and "max_rounds" in run.stderr and "Traceback" not in run.stderr
    (bundle / "budget.json").write_text(json.dumps({"rounds": 2}))
    run = run_cli(*_args(bundle, tmp_path / "out"), "--budget", bundle / "budget.json")
    assert run.returncode == 1 and "unknown key 'rounds'" in run.stderr
    run = run_cli(*_args(bundle, tmp_path / "out"), "--min-speedup", "0.5")
    assert run.returncode == 1 and "--min-speedup 0.5: input should be greater than or equal to 1" in run.stderr
    run = run_cli(*_args(bundle, tmp_path / "out"), "--max-rounds", "two")
    assert run.returncode == 1 and "invalid int value" in run.stderr


def test_relative_paths_are_resolved(tmp_path: Path) -> None:
    out = tmp_path / "out"
    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / "001.py").write_text((SYNTHETIC / "kernel.py").read_text().replace("100.0", "50.0"))
    args = [str(a).replace(str(SYNTHETIC) + "/", "") for a in synthetic_args(out, "--provider", "replay",
                                                                              "--replay-dir", replay)]
    run = run_cli(*args, cwd=SYNTHETIC)
    assert run.returncode == 0, run.stderr
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["inputs"]["kernel"] == str(SYNTHETIC / "kernel.py")


def test_baseline_failing_a_protected_case_exits_1_naming_it(bundle: Path, tmp_path: Path) -> None:
    (bundle / "kernel.py").write_text('LATENCY_US = 100.0\n\n\ndef scale(values):\n    return [v * 2.5 for v in values]\n')
    run = run_cli(*_args(bundle, tmp_path / "out"))
    assert run.returncode == 1
    assert "baseline kernel failed: incorrect: protected case small failed" in run.stderr
