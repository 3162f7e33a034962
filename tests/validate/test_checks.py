"""The preflight's verdicts as pure functions of evaluations (stability, profile, negative tests)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.decision.statistics import sample_stats
from orchestrator.preflight.checks import (
    check_incorrect_rejected,
    check_invalid_rejected,
    check_profile,
    check_stability,
    profile_case_verdict,
)
from orchestrator.worker.evaluation import sandbox_for
from protocol.bundle import Case, Target
from protocol.results import CaseMeasurement, Evaluation, EvaluationStatus
from protocol.worker import IsolationConfig
from sandbox_worker.harness_kit import proton
from tests.conftest import PROJECT_ROOT

CASES = [Case(case_id="a"), Case(case_id="b", protected=False)]
HATCHET = PROJECT_ROOT / "tests" / "fixtures" / "h200_vector_add_call_scopes.hatchet"


def _evaluation(samples: dict[str, list[float]], status: EvaluationStatus = EvaluationStatus.OK,
                correct: dict[str, bool] | None = None, profile: dict | None = None) -> Evaluation:
    cases = []
    for case in CASES:
        values = samples.get(case.case_id, [])
        cases.append(CaseMeasurement(case_id=case.case_id, protected=case.protected, weight=1.0,
                                     correct=(correct or {}).get(case.case_id, True), samples_us=values,
                                     stats=sample_stats(values) if values else None, profile=profile))
    return Evaluation(label="validate", status=status, reason="" if status is EvaluationStatus.OK else "boom",
                      cases=cases)


def test_stability_passes_within_max_cv_and_reports_spread() -> None:
    workers = [_evaluation({"a": [100.0, 101.0, 99.0], "b": [10.0, 10.1, 9.9]}),
               _evaluation({"a": [102.0, 103.0, 101.0], "b": [10.0, 10.2, 9.8]}),
               _evaluation({"a": [98.0, 99.0, 97.0], "b": [10.1, 10.0, 9.9]})]
    result, rows = check_stability(workers, CASES, max_cv=0.05)
    assert result.status == "passed", result.message
    row = rows[0]
    assert row.medians_us == [100.0, 102.0, 98.0] and row.median_us == 100.0
    assert abs(row.median_spread - 0.04) < 1e-12 and row.stable


def test_stability_fails_on_within_worker_cv_and_on_between_worker_drift() -> None:
    noisy = [_evaluation({"a": [50.0, 150.0, 100.0], "b": [10.0, 10.0, 10.0]}) for _ in range(3)]
    result, rows = check_stability(noisy, CASES, max_cv=0.1)
    assert result.status == "failed" and "case a: worst within-worker CV 0.5000 > --max-cv 0.1000" in result.message
    assert [r.stable for r in rows] == [False, True]
    drifting = [_evaluation({"a": [100.0] * 3, "b": [10.0] * 3}), _evaluation({"a": [130.0] * 3, "b": [10.0] * 3}),
                _evaluation({"a": [100.0] * 3, "b": [10.0] * 3})]
    result, _ = check_stability(drifting, CASES, max_cv=0.1)
    assert result.status == "failed" and "case a: per-worker medians spread 30.00% > --max-cv 0.1000" in result.message
    crashed = [_evaluation({"a": [100.0] * 3, "b": [10.0] * 3}), _evaluation({}, EvaluationStatus.CRASHED)]
    result, rows = check_stability(crashed, CASES, max_cv=0.1)
    assert result.message.startswith("benchmark worker 2 failed: crashed: boom")
    assert not any(r.stable for r in rows)


def test_profile_verdict_on_a_real_h200_proton_attribution() -> None:
    attribution = proton.parse_hatchet(HATCHET, "add_kernel")
    status, message = profile_case_verdict({"proton": attribution}, "add_kernel")
    assert status == "passed" and message.startswith("main launch 'add_kernel' (46.832 us per call)")
    status, message = profile_case_verdict({"proton": proton.parse_hatchet(HATCHET, None)}, None)
    assert status == "passed" and "the only Triton kernel is 'add_kernel'" in message
    status, message = profile_case_verdict({"proton": proton.parse_hatchet(HATCHET, "softmax_kernel")},
                                           "softmax_kernel")
    assert status == "failed" and "main_scope 'softmax_kernel' matched no kernel launch" in message
    unavailable = proton.unavailable_attribution(["no CUDA device (CPU-only machine); Proton needs a GPU"])
    assert profile_case_verdict({"proton": unavailable}, "add_kernel") == (
        "skipped", "no CUDA device (CPU-only machine); Proton needs a GPU")
    assert profile_case_verdict({"available": False, "error": "RuntimeError: x"}, None) == (
        "failed", "profile() raised RuntimeError: x")


def test_profile_check_aggregates_cases() -> None:
    target = Target(backend="cuda", architecture="H200", main_scope="add_kernel")
    profiled = _evaluation({"a": [1.0], "b": [1.0]}, profile={"proton": proton.parse_hatchet(HATCHET, "add_kernel")})
    assert check_profile(profiled, target, ["build", "verify", "benchmark", "profile"], True).status == "passed"
    assert check_profile(profiled, target, ["build", "verify", "benchmark"], True).status == "skipped"
    cpu_only = _evaluation({"a": [1.0]}, profile={"proton": proton.unavailable_attribution(["no GPU"])})
    result = check_profile(cpu_only, target, ["build", "verify", "benchmark", "profile"], True)
    assert result.status == "skipped" and result.message.endswith("main launch not checked: no GPU")


def test_negative_verdicts() -> None:
    assert check_invalid_rejected(_evaluation({}, EvaluationStatus.BUILD_FAILED)).status == "passed"
    crashed = check_invalid_rejected(_evaluation({}, EvaluationStatus.CRASHED))
    assert crashed.status == "failed" and "only stopped later (crashed: boom" in crashed.message
    how = "outputs shifted"
    caught = _evaluation({}, EvaluationStatus.INCORRECT, correct={"a": False, "b": False})
    assert check_incorrect_rejected(caught, CASES, how).status == "passed"
    protected_miss = _evaluation({}, EvaluationStatus.INCORRECT, correct={"a": True, "b": False})
    result = check_incorrect_rejected(protected_miss, CASES, how)
    assert result.status == "failed" and result.message.startswith("protected case(s) a accept an incorrect kernel")
    unprotected_miss = _evaluation({}, EvaluationStatus.INCORRECT, correct={"a": False, "b": True})
    assert check_incorrect_rejected(unprotected_miss, CASES, how).status == "passed"
    built_not = check_incorrect_rejected(_evaluation({}, EvaluationStatus.BUILD_FAILED), CASES, how)
    assert built_not.status == "failed" and "should fail verify but ended build_failed" in built_not.message
    none = check_incorrect_rejected(None, CASES, how, "no public Python function to wrap")
    assert none.status == "failed" and none.message == "no public Python function to wrap"


def test_the_preflight_sandbox_is_a_run_sandbox() -> None:
    """`sandbox_for` is the one isolation config of an evaluation worker (run and preflight alike)."""
    config = sandbox_for("strict", Path("/w/untouched-1"), Path("/w/profile"), data_limit_bytes=1 << 30,
                         phase_seconds=60.0)
    assert config == IsolationConfig(mode="strict", scratch_dir="/w/untouched-1",
                                     writable_dirs=["/w/untouched-1", "/w/profile"], data_limit_bytes=1 << 30,
                                     cpu_seconds=130)
    assert sandbox_for("off", Path("/w/x"), None, data_limit_bytes=None, phase_seconds=0.5).writable_dirs == ["/w/x"]
