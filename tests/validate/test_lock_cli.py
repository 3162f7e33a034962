"""optimize and the preflight: `--bundle-lock`, the built-in validation, `--skip-validation` (synthetic bundle)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli, synthetic_args, synthetic_kernel, write_candidates
from tests.validate import VERIFY_ACCEPTS_EVERYTHING, bundle_args, make_bundle

pytestmark = pytest.mark.timeout(180)


def _optimize_args(bundle: dict[str, Path], out: Path, replay: Path, *extra: str | Path) -> list[str | Path]:
    args = synthetic_args(out, "--provider", "replay", "--replay-dir", replay, "--max-rounds", "1", *extra)
    for flag in ("--kernel", "--harness", "--cases", "--target"):
        args[args.index(flag) + 1] = bundle[flag.removeprefix("--")]
    return args


@pytest.fixture
def validated(tmp_path: Path) -> tuple[dict[str, Path], Path, Path]:
    """A synthetic bundle, its bundle.lock.json, and a replay dir with one faster candidate."""
    bundle = make_bundle(tmp_path / "bundle")
    run = run_cli("validate", *bundle_args(bundle, tmp_path / "validated"))
    assert run.returncode == 0, run.stderr
    replay = write_candidates(tmp_path / "replay", [synthetic_kernel(50.0)])
    return bundle, tmp_path / "validated" / "bundle.lock.json", replay


def test_a_matching_lock_is_accepted_and_recorded(validated, tmp_path: Path) -> None:
    bundle, lock, replay = validated
    out = tmp_path / "out"
    run = run_cli(*_optimize_args(bundle, out, replay, "--bundle-lock", lock))
    assert run.returncode == 0, run.stderr
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["skip_validation"] is False
    recorded = manifest["bundle_lock"]
    assert recorded["mode"] == "lock" and recorded["path"] == str(lock) and recorded["passed"] is True
    assert recorded["files"]["harness"] == manifest["bundle"]["sha256"]["harness.py"]
    assert recorded["checks"]["negative_incorrect_output"] == "passed"
    assert "validate status=locked" in run.stderr
    assert not (out / "validation").exists(), "a lock replaces the built-in preflight"


@pytest.mark.parametrize("role", ["harness", "kernel", "cases", "target"])
def test_tampering_after_validation_stops_optimize_naming_the_file(validated, tmp_path: Path, role: str) -> None:
    bundle, lock, replay = validated
    path = bundle[role]
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n" if role in ("cases", "target") else "\n# edited after validation\n")
    out = tmp_path / "out"
    run = run_cli(*_optimize_args(bundle, out, replay, "--bundle-lock", lock))
    assert run.returncode == 1
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert f"{role} file {path} changed since {lock} was written" in lines[0]
    assert "re-run tlx-agent validate" in lines[0]
    assert json.loads(run.stdout)["success"] is False
    assert not out.exists(), "a lock mismatch stops before anything is written"


@pytest.mark.slow  # several validate runs through the CLI (over 5 s)
def test_a_lock_for_other_files_or_a_failed_lock_is_refused(validated, tmp_path: Path) -> None:
    bundle, lock, replay = validated
    copy = tmp_path / "copy-cases.json"
    shutil.copyfile(bundle["cases"], copy)  # same bytes, another file: not what was validated
    run = run_cli(*_optimize_args({**bundle, "cases": copy}, tmp_path / "out", replay, "--bundle-lock", lock))
    assert run.returncode == 1
    assert f"was written for cases {bundle['cases']}, but --cases is {copy}" in run.stderr

    budget = tmp_path / "budget.json"
    budget.write_text("{}")
    run = run_cli(*_optimize_args(bundle, tmp_path / "out", replay, "--bundle-lock", lock, "--budget", budget))
    assert run.returncode == 1 and f"does not cover --budget {budget}" in run.stderr

    payload = json.loads(lock.read_text())
    payload.update(passed=False, failed_checks=["negative_incorrect_output"])
    failed = tmp_path / "failed.lock.json"
    failed.write_text(json.dumps(payload))
    run = run_cli(*_optimize_args(bundle, tmp_path / "out", replay, "--bundle-lock", failed))
    assert run.returncode == 1 and "records failed checks (negative_incorrect_output)" in run.stderr

    broken = tmp_path / "broken.lock.json"
    broken.write_text("{")
    run = run_cli(*_optimize_args(bundle, tmp_path / "out", replay, "--bundle-lock", broken))
    assert run.returncode == 1 and "is not valid JSON" in run.stderr

    run = run_cli(*_optimize_args(bundle, tmp_path / "out", replay, "--bundle-lock", lock, "--skip-validation"))
    assert run.returncode == 1 and "exclude each other" in run.stderr

    run = run_cli(*_optimize_args(bundle, tmp_path / "out", replay, "--bundle-lock", lock, "--arch", "b200"))
    assert run.returncode == 1
    assert "--arch b200 expects a CUDA device (sm_100), but the harness sees cpu" in run.stderr
    assert not (tmp_path / "out").exists()


def test_builtin_preflight_runs_the_negative_tests_and_is_recorded(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle")
    replay = write_candidates(tmp_path / "replay", [synthetic_kernel(50.0)])
    out = tmp_path / "out"
    run = run_cli(*_optimize_args(bundle, out, replay))
    assert run.returncode == 0, run.stderr
    manifest = json.loads((out / "run.json").read_text())
    recorded = manifest["bundle_lock"]
    assert manifest["skip_validation"] is False and recorded["mode"] == "builtin"
    assert recorded["checks"]["negative_invalid_source"] == "passed"
    assert recorded["checks"]["negative_incorrect_output"] == "passed"
    assert recorded["checks"]["build"] == "skipped"  # the baseline evaluation builds and verifies
    assert recorded["path"] == str(out / "validation" / "bundle.lock.json")
    assert json.loads((out / "validation" / "bundle.lock.json").read_text())["mode"] == "builtin"
    log = (out / "live.log").read_text()
    assert log.index("validate result=PASSED") < log.index("bundle frozen")
    # the preflight's workers are the run's first: forked by its fork server, no interpreter of their own
    assert log.index("worker start: forked by the fork server") < log.index("validate worker=negative-invalid")


def test_builtin_preflight_stops_a_bundle_that_cannot_catch_bad_candidates(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", harness_extra=VERIFY_ACCEPTS_EVERYTHING)
    replay = write_candidates(tmp_path / "replay", [synthetic_kernel(50.0)])
    out = tmp_path / "out"
    run = run_cli(*_optimize_args(bundle, out, replay))
    assert run.returncode == 1
    result = json.loads(run.stdout)
    assert result["success"] is False
    assert result["error"].startswith("bundle preflight failed: negative_incorrect_output: verify accepted an "
                                      "incorrect kernel")
    assert "--skip-validation" in result["error"]
    assert not (out / "run.json").exists() and not (out / "experiments").exists(), "no candidate ran"

    skipped = tmp_path / "skipped"
    run = run_cli(*_optimize_args(bundle, skipped, replay, "--skip-validation"))
    assert run.returncode == 0, run.stderr
    manifest = json.loads((skipped / "run.json").read_text())
    assert manifest["skip_validation"] is True and manifest["bundle_lock"] is None
    assert "validate status=skipped (--skip-validation)" in run.stderr
    assert not (skipped / "validation").exists()


def test_builtin_preflight_leaves_a_broken_kernel_to_the_baseline(tmp_path: Path) -> None:
    # the identity kernel fails verify; so does the negative test's variant of it... for the wrong reason
    # (this verify only asks "did anything change?"), so the preflight evaluates the untouched kernel, sees
    # that it fails anyway, and leaves the verdict to the baseline evaluation and its usual message
    weak_verify = "\n\ndef verify(module, case):\n    return module.scale([1.0]) != [1.0]\n"
    bundle = make_bundle(tmp_path / "bundle", kernel="LATENCY_US = 100.0\n\n\ndef scale(values):\n    return values\n",
                         harness_extra=weak_verify)
    replay = write_candidates(tmp_path / "replay", [synthetic_kernel(50.0)])
    run = run_cli(*_optimize_args(bundle, tmp_path / "out", replay))
    assert run.returncode == 1
    assert "baseline kernel failed: incorrect: protected case small failed" in run.stderr
    assert "validate check=negative_incorrect_output status=skipped" in run.stderr
