"""`verdict_process: "auto"` asks for the judge; an untouched kernel the judge cannot take falls back, said aloud.

The bundle in `unjudgeable/` is vector_add with a dict of options passed to the entry: the harness's own
verify handles it, the judge's shared slots carry tensors and plain values only. Through the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.worker.verdict_fallback import (
    fallback_reason,
    in_candidate_process,
    may_fall_back,
    screening_target,
)
from protocol.bundle import Target
from protocol.results import Evaluation, EvaluationStatus, WorkerRecord
from tests.conftest import run_cli

BUNDLE = Path(__file__).resolve().parent / "unjudgeable"
TARGET = Target(backend="cuda", architecture="H200")


def _evaluation(status: EvaluationStatus, verdict_process: str | None) -> Evaluation:
    return Evaluation(label="baseline", status=status, reason="verify raised TypeError: not dict",
                      worker=WorkerRecord(verdict_process=verdict_process))


def test_auto_falls_back_only_when_the_judge_failed_the_untouched_kernel():
    assert may_fall_back(TARGET, _evaluation(EvaluationStatus.INCORRECT, "judge"))
    assert may_fall_back(TARGET, _evaluation(EvaluationStatus.CRASHED, None))  # died before ready (CUDA at import)
    assert not may_fall_back(TARGET, _evaluation(EvaluationStatus.OK, "judge"))
    assert not may_fall_back(TARGET, _evaluation(EvaluationStatus.INCORRECT, "candidate"))  # nothing to fall back to
    chosen = TARGET.model_copy(update={"verdict_process": "judge"})
    assert not may_fall_back(chosen, _evaluation(EvaluationStatus.INCORRECT, "judge"))  # the user asked for the judge


def test_the_fallback_target_and_reason_say_what_to_change():
    assert in_candidate_process(TARGET).verdict_process == "candidate"
    assert TARGET.verdict_process == "auto"  # a copy: the bundle's target is never edited
    reason = fallback_reason(_evaluation(EvaluationStatus.INCORRECT, "judge"))
    assert reason.startswith("the judge could not take the untouched kernel (incorrect: verify raised TypeError")
    assert '"verdict_process": "candidate"' in reason


def test_gpu_screening_workers_start_without_a_judge_and_cpu_ones_keep_it():
    assert screening_target(TARGET).verdict_process == "candidate"  # a GPU judge screens in its own process anyway
    interpreter = Target(backend="cpu", architecture="interpreter")
    assert screening_target(interpreter).verdict_process == "auto"  # the CPU judge screens each variant apart


def _optimize(out: Path, target: Path, *extra: str) -> object:
    return run_cli("optimize", "--kernel", BUNDLE / "kernel.py", "--harness", BUNDLE / "harness.py",
                   "--cases", BUNDLE / "cases.json", "--target", target, "--output-dir", out, "--no-commit-winner",
                   "--provider", "replay", "--replay-dir", BUNDLE / "candidates", "--no-profile", *extra)


@pytest.mark.slow
def test_an_unjudgeable_baseline_runs_the_whole_run_in_the_candidates_process(out_dir):
    run = _optimize(out_dir, BUNDLE / "target.json")
    assert run.returncode == 2, run.stderr[-3000:]  # the one replayed candidate is wrong: no winner, not an error
    assert "baseline verdict_fallback=candidate reason='the judge could not take the untouched kernel" in run.stderr
    assert "judged mode passes tensors and plain values, not dict" in run.stderr
    assert "verdict process=candidate reason='the judge could not take" in run.stderr
    for result in (run.result, json.loads((out_dir / "result.json").read_text())):
        assert result["report"]["verdict_process"] == "candidate"
        assert "not dict" in result["report"]["verdict_fallback"]
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "rejected"}
    workers = [e["worker"]["verdict_process"] for x in run.result["experiments"] for e in x["evaluations"]]
    assert workers and set(workers) == {"candidate"}
    assert "incorrect" in run.experiment("r001-c000")["decision"]["reason"]
    # both baseline workers are kept: the judged one that failed and the one the run measured
    assert (out_dir / "experiments/baseline/evaluations/baseline.json").is_file()
    assert (out_dir / "experiments/baseline/evaluations/baseline-candidate-process.json").is_file()


@pytest.mark.slow
def test_a_target_that_asks_for_the_judge_gets_no_fallback(out_dir, tmp_path):
    target = tmp_path / "target.json"
    target.write_text(json.dumps({**json.loads((BUNDLE / "target.json").read_text()), "verdict_process": "judge"}))
    run = _optimize(out_dir, target)
    assert run.returncode == 1, run.stderr[-3000:]
    assert "verdict_fallback" not in run.stderr
    assert "baseline kernel failed: incorrect" in run.stderr and "not dict" in run.stderr


@pytest.mark.slow
def test_validate_reports_the_fallback_as_a_check(out_dir):
    run = run_cli("validate", "--kernel", BUNDLE / "kernel.py", "--harness", BUNDLE / "harness.py", "--cases",
                  BUNDLE / "cases.json", "--target", BUNDLE / "target.json", "--output-dir", out_dir, "--arch", "cpu",
                  "--no-profile", timeout=280)
    # the bundle cannot be judged, and the target did not choose the candidate's process by name: said before any
    # run, as a failed check (the fallback itself still worked: verify and the negative tests passed there)
    assert run.returncode == 1, run.stderr[-3000:]
    lock = json.loads(run.stdout)
    checks = {check["name"]: check for check in lock["checks"]}
    assert lock["passed"] is False and lock["failed_checks"] == ["verdict_process"]
    assert checks["verdict_process"]["status"] == "failed"
    assert checks["verdict_process"]["message"].startswith("the judge could not take the untouched kernel")
    assert checks["verify"]["status"] == "passed"
    assert checks["negative_incorrect_output"]["status"] == "passed"


@pytest.mark.slow
def test_validate_passes_when_the_target_chooses_the_candidates_process_by_name(out_dir, tmp_path):
    target = tmp_path / "target.json"
    target.write_text(json.dumps({**json.loads((BUNDLE / "target.json").read_text()), "verdict_process": "candidate"}))
    run = run_cli("validate", "--kernel", BUNDLE / "kernel.py", "--harness", BUNDLE / "harness.py", "--cases",
                  BUNDLE / "cases.json", "--target", target, "--output-dir", out_dir, "--arch", "cpu",
                  "--no-profile", timeout=280)
    assert run.returncode == 0, run.stderr[-3000:]
    check = next(c for c in json.loads(run.stdout)["checks"] if c["name"] == "verdict_process")
    assert check["status"] == "passed" and "as target.json asks" in check["message"]
