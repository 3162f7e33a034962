"""`tlx-agent validate` through the real CLI and real workers, on the fast synthetic bundle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.bundle.inputs import sha256_file
from tests.conftest import run_cli
from tests.validate import (
    BUILD_ACCEPTS_INVALID_SOURCE,
    UNSTABLE_BENCHMARK,
    VERIFY_ACCEPTS_EVERYTHING,
    bundle_args,
    check,
    fake_profile,
    make_bundle,
)

pytestmark = pytest.mark.timeout(120)

ALL_CHECKS = ["device", "build", "verify", "verdict_process", "benchmark_stability", "work_figures", "profile",
              "negative_invalid_source", "negative_incorrect_output", "bundle_unchanged"]


def _validate(bundle: dict[str, Path], out: Path | None, *extra: str):
    return run_cli("validate", *bundle_args(bundle, out, *extra))


def test_a_good_bundle_passes_and_the_lock_records_everything(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle")
    out = tmp_path / "out"
    run = _validate(bundle, out)
    assert run.returncode == 0, run.stderr
    lock = json.loads(run.stdout)
    assert lock == json.loads((out / "bundle.lock.json").read_text())
    assert lock["passed"] is True and lock["failed_checks"] == []
    assert [c["name"] for c in lock["checks"]] == ALL_CHECKS
    assert {c["name"]: c["status"] for c in lock["checks"]} == {  # the synthetic harness has no profile() and
        **dict.fromkeys(ALL_CHECKS, "passed"), "profile": "skipped", "work_figures": "skipped"}  # no work figures
    assert "defines no profile()" in check(lock, "profile")["message"]
    assert check(lock, "work_figures")["message"].startswith("warning: the harness reports no work figures")
    assert "validate warning='the harness reports no work figures" in run.stderr
    assert "as target.json asks" in check(lock, "verdict_process")["message"]
    for role, path in bundle.items():
        assert lock["files"][role] == {"path": str(path.resolve()), "sha256": sha256_file(path),
                                       "size": path.stat().st_size}
    assert lock["case_ids"] == ["small", "large"] and lock["protected_case_ids"] == ["small", "large"]
    assert lock["harness_functions"] == ["build", "verify", "benchmark"]
    assert lock["lock_path"] == str(out / "bundle.lock.json") and lock["output_dir"] == str(out)
    assert lock["settings"]["benchmark_workers"] == 3 and lock["settings"]["max_cv"] == 0.1
    assert lock["versions"]["worker"]["python"] and lock["versions"]["pydantic"]
    assert lock["device"]["kind"] == "cpu"
    rows = {row["case_id"]: row for row in lock["stability"]}
    assert set(rows) == {"small", "large"}
    for row in rows.values():
        assert len(row["medians_us"]) == 3 and len(row["cvs"]) == 3 and row["stable"] is True
        assert 0 <= row["median_spread"] < 0.05 and row["max_cv"] < 0.05
    assert 95 < rows["small"]["median_us"] < 105 and 380 < rows["large"]["median_us"] < 420
    # the report on stderr names every check and the verdict; workers ran on a frozen copy of the bundle
    assert "validate result=PASSED" in run.stderr
    for name in ALL_CHECKS:
        assert f"check={name} " in run.stderr
    assert (out / "bundle" / "harness.py").read_bytes() == bundle["harness"].read_bytes()
    assert len(list(out.glob("worker-*.log"))) == 5  # three benchmark workers, two negative tests
    assert (out / "validate.log").read_text().count("[tlx-agent] validate check=") == len(ALL_CHECKS)


def test_verify_that_accepts_everything_fails_the_negative_test(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", harness_extra=VERIFY_ACCEPTS_EVERYTHING)
    run = _validate(bundle, tmp_path / "out")
    assert run.returncode == 1, run.stderr
    lock = json.loads(run.stdout)
    assert lock["passed"] is False and lock["failed_checks"] == ["negative_incorrect_output"]
    message = check(lock, "negative_incorrect_output")["message"]
    assert "verify accepted an incorrect kernel on every case" in message
    assert "cannot catch bad candidates" in message
    assert check(lock, "negative_invalid_source")["status"] == "passed"
    assert "validate result=FAILED (negative_incorrect_output)" in run.stderr


def test_build_that_accepts_invalid_source_is_reported(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", harness_extra=BUILD_ACCEPTS_INVALID_SOURCE)
    run = _validate(bundle, tmp_path / "out")
    assert run.returncode == 1, run.stderr
    lock = json.loads(run.stdout)
    assert lock["failed_checks"] == ["negative_invalid_source"]
    assert "build accepted a kernel with a syntax error" in check(lock, "negative_invalid_source")["message"]
    assert check(lock, "negative_incorrect_output")["status"] == "passed"


def test_a_protected_case_that_fails_is_named(tmp_path: Path) -> None:
    wrong_on_large = ('LATENCY_US = 100.0\n\n\ndef scale(values):\n'
                      '    factor = 2.0 if len(values) < 100 else 2.5\n    return [v * factor for v in values]\n')
    bundle = make_bundle(tmp_path / "bundle", kernel=wrong_on_large)
    run = _validate(bundle, tmp_path / "out")
    assert run.returncode == 1, run.stderr
    lock = json.loads(run.stdout)
    verify = check(lock, "verify")
    assert verify["status"] == "failed"
    assert "protected case(s) large fail on the untouched kernel" in verify["message"]
    assert "wrong elements" in verify["message"]
    assert check(lock, "benchmark_stability")["status"] == "skipped"
    assert lock["failed_checks"] == ["verify"]
    negative = check(lock, "negative_incorrect_output")  # a kernel that is wrong anyway proves nothing
    assert negative["status"] == "skipped" and "already fails build or verify" in negative["message"]


def test_an_unprotected_failing_case_is_only_a_note(tmp_path: Path) -> None:
    wrong_on_large = ('LATENCY_US = 100.0\n\n\ndef scale(values):\n'
                      '    factor = 2.0 if len(values) < 100 else 2.5\n    return [v * factor for v in values]\n')
    cases = [{"case_id": "small", "parameters": {"n": 64, "cost": 1.0}},
             {"case_id": "large", "parameters": {"n": 512, "cost": 4.0}, "protected": False}]
    bundle = make_bundle(tmp_path / "bundle", kernel=wrong_on_large, cases=cases)
    run = _validate(bundle, tmp_path / "out")
    lock = json.loads(run.stdout)
    verify = check(lock, "verify")
    assert verify["status"] == "passed" and "unprotected case(s) large fail" in verify["message"]
    assert verify["details"]["failed_unprotected"] == ["large"]


def test_unstable_timing_above_max_cv_fails(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", harness_extra=UNSTABLE_BENCHMARK)
    run = _validate(bundle, tmp_path / "out")  # the default --max-cv (0.10) of a non-interpreter target
    assert run.returncode == 1, run.stderr
    lock = json.loads(run.stdout)
    assert lock["failed_checks"] == ["benchmark_stability"]
    message = check(lock, "benchmark_stability")["message"]
    assert "worst within-worker CV" in message and "> --max-cv 0.1000" in message
    assert all(row["stable"] is False and row["max_cv"] > 0.2 for row in lock["stability"])
    assert "stable=False" in run.stderr


@pytest.mark.slow  # several validate runs through the CLI (over 5 s)
def test_profile_must_select_the_main_kernel(tmp_path: Path) -> None:
    kernels = [{"name": "scale_kernel", "time_us": 50.0, "count": 10}, {"name": "fill_kernel", "time_us": 2.0, "count": 10}]
    target = {"backend": "cpu", "architecture": "synthetic", "main_scope": "scale_kernel"}
    good = make_bundle(tmp_path / "good", harness_extra=fake_profile(kernels, "scale_kernel"), target=target)
    run = _validate(good, tmp_path / "out-good")
    assert run.returncode == 0, run.stderr
    profile = check(json.loads(run.stdout), "profile")
    assert profile["status"] == "passed" and "main launch 'scale_kernel' (5.000 us per call)" in profile["message"]

    wrong = make_bundle(tmp_path / "wrong", harness_extra=fake_profile(kernels, "add_kernel"),
                        target={**target, "main_scope": "add_kernel"})
    run = _validate(wrong, tmp_path / "out-wrong")
    assert run.returncode == 1
    profile = check(json.loads(run.stdout), "profile")
    assert profile["status"] == "failed"
    assert "main_scope 'add_kernel' matched no kernel launch" in profile["message"]
    assert "scale_kernel" in profile["message"]

    unnamed = make_bundle(tmp_path / "unnamed", harness_extra=fake_profile(kernels, None),
                          target={"backend": "cpu", "architecture": "synthetic"})
    run = _validate(unnamed, tmp_path / "out-unnamed")
    assert run.returncode == 1
    assert "2 kernels launched (scale_kernel, fill_kernel) and target.json sets no main_scope" in \
        check(json.loads(run.stdout), "profile")["message"]

    run = _validate(unnamed, tmp_path / "out-unnamed-2", "--no-profile")
    assert run.returncode == 0, run.stderr
    assert check(json.loads(run.stdout), "profile")["message"] == "profiling disabled (--no-profile)"


@pytest.mark.slow  # several validate runs through the CLI (over 5 s)
def test_arch_must_match_the_device_the_harness_sees(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle")
    run = _validate(bundle, tmp_path / "out", "--arch", "h200")
    assert run.returncode == 1
    lock = json.loads(run.stdout)
    assert lock["failed_checks"] == ["device"]
    assert check(lock, "device")["message"].startswith("--arch h200 expects a CUDA device (sm_90), but the harness sees cpu")
    run = _validate(bundle, tmp_path / "out-cpu", "--arch", "host")
    assert run.returncode == 0, run.stderr
    assert check(json.loads(run.stdout), "device")["message"].startswith("--arch host matches")


def test_a_cuda_bundle_on_a_machine_without_cuda_fails_the_device_check(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", target={"backend": "cuda", "architecture": "H200", "device": "cuda:0"})
    run = _validate(bundle, tmp_path / "out")
    assert run.returncode == 1
    message = check(json.loads(run.stdout), "device")["message"]
    assert message.startswith("target.json backend 'cuda' needs a CUDA device, but the harness sees cpu")
    assert "torch.cuda.is_available() is False" in message


@pytest.mark.parametrize(("extra", "expected"), [
    (("--arch", "h300"), "--arch 'h300' is not a known architecture"),
    (("--benchmark-workers", "2"), "--benchmark-workers must be at least 3"),
    (("--max-cv", "-1"), "--max-cv -1: input should be greater than or equal to 0"),
])
def test_bad_flags_are_one_line(tmp_path: Path, extra: tuple[str, str], expected: str) -> None:
    out = tmp_path / "out"
    run = _validate(make_bundle(tmp_path / "bundle"), out, *extra)
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1 and expected in run.stderr, run.stderr
    assert json.loads(run.stdout)["success"] is False
    assert not out.exists()


def test_an_output_dir_that_is_not_empty_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "something").write_text("x")
    run = _validate(make_bundle(tmp_path / "bundle"), out)
    assert run.returncode == 1 and "is not empty" in run.stderr


def test_without_output_dir_the_lock_goes_to_a_fresh_temp_dir(tmp_path: Path) -> None:
    run = run_cli("validate", *bundle_args(make_bundle(tmp_path / "bundle"), None), env={"TMPDIR": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    lock = json.loads(run.stdout)
    assert Path(lock["lock_path"]).parent.parent == tmp_path
    assert json.loads(Path(lock["lock_path"]).read_text()) == lock


def _harness_without(name: str) -> str:
    functions = {"build": "def build(s, t):\n    return s\n", "verify": "def verify(a, c):\n    return True\n",
                 "benchmark": "def benchmark(a, c, r):\n    return [1.0]\n"}
    return "\n\n".join(body for key, body in functions.items() if key != name)


BAD_INPUTS = {
    "missing kernel": (lambda b: b["kernel"].unlink(), "kernel.py does not exist"),
    "missing cases": (lambda b: b["cases"].unlink(), "cases.json does not exist"),
    "cases invalid JSON": (lambda b: b["cases"].write_text("[{"), "cases.json is not valid JSON"),
    "case unknown key": (lambda b: b["cases"].write_text(json.dumps([{"case_id": "a", "wieght": 1}])),
                         "unknown key 'wieght'"),
    "case wrong type": (lambda b: b["cases"].write_text(json.dumps([{"case_id": "a", "parameters": [1]}])),
                        "field 'parameters' is invalid"),
    "cases empty": (lambda b: b["cases"].write_text("[]"), "the case list is empty"),
    "case negative weight": (lambda b: b["cases"].write_text(json.dumps([{"case_id": "a", "weight": -2}])),
                             "field 'weight' is invalid: weight must be a finite number > 0"),
    "target unknown key": (lambda b: b["target"].write_text(json.dumps({"backend": "cpu", "architecture": "x",
                                                                        "env": {}})), "unknown key 'env'"),
    "target wrong type": (lambda b: b["target"].write_text(json.dumps({"backend": "cpu", "architecture": 3})),
                          "field 'architecture' is invalid"),
    "harness without build": (lambda b: b["harness"].write_text(_harness_without("build")), "does not define build"),
    "harness without verify": (lambda b: b["harness"].write_text(_harness_without("verify")),
                               "does not define verify"),
    "harness without benchmark": (lambda b: b["harness"].write_text(_harness_without("benchmark")),
                                  "does not define benchmark"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_bundle_input_is_one_clear_line(name: str, tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle")
    breaker, expected = BAD_INPUTS[name]
    breaker(bundle)
    out = tmp_path / "out"
    run = _validate(bundle, out)
    assert run.returncode == 1
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("[tlx-agent] error: ") and expected in lines[0], lines[0]
    assert "Traceback" not in run.stderr
    assert json.loads(run.stdout)["success"] is False
    assert not out.exists()


def test_a_file_edited_while_validating_fails_the_lock(tmp_path: Path) -> None:
    directory = tmp_path / "bundle"
    kernel = directory / "kernel.py"
    # stands in for an engineer (or a tool) editing the kernel while validation runs
    editor = (f"\n\n_build_before = build\n\n\ndef build(kernel_source, target):\n"
              f"    with open({str(kernel)!r}, 'a') as handle:\n        handle.write('# edited\\n')\n"
              f"    return _build_before(kernel_source, target)\n")
    bundle = make_bundle(directory, harness_extra=editor)
    run = _validate(bundle, tmp_path / "out", "--isolation", "off")
    assert run.returncode == 1
    lock = json.loads(run.stdout)
    assert lock["failed_checks"] == ["bundle_unchanged"]
    assert check(lock, "bundle_unchanged")["message"] == (
        f"input file(s) changed while validating: kernel {kernel}; validate again once they are final")
