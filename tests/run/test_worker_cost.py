"""Where a worker's time goes: every evaluation records seconds per phase, and the run's report sums them."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from orchestrator.ledger.reporting import verify_cost, worker_cost
from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import SubprocessSpawner
from protocol.bundle import load_cases_file, load_target_file
from protocol.results import CaseMeasurement, Evaluation, EvaluationStatus, WorkerRecord
from protocol.worker import IsolationConfig
from sandbox_worker.judged.step_clock import StepClock, candidate_reported
from tests.conftest import SYNTHETIC


def test_a_real_workers_phases_account_for_its_wall_time(tmp_path: Path):
    work_dir = tmp_path / "worker"

    async def main():
        plan = EvaluationPlan(
            label="candidate", experiment_id="e001", run_id="cost", kernel_path=SYNTHETIC / "kernel.py",
            harness_path=SYNTHETIC / "harness.py", target=load_target_file(SYNTHETIC / "target.json"),
            cases=load_cases_file(SYNTHETIC / "cases.json"), repetitions=5, work_dir=work_dir,
            log_path=tmp_path / "worker.log", deadline=trio.current_time() + 60.0, phase_seconds=30.0,
            isolation=IsolationConfig(mode="standard", scratch_dir=str(work_dir), writable_dirs=[str(work_dir)]))
        return await run_evaluation(plan, SubprocessSpawner(), dict(os.environ))

    evaluation = trio.run(main)
    assert evaluation.status.value == "ok", evaluation.reason
    phases = evaluation.worker.phases
    assert list(phases) == ["start", "setup", "build", "verify", "benchmark", "shutdown", "teardown"]
    assert all(seconds >= 0 for seconds in phases.values())
    # the phases cover the evaluation from the spawn to the end of the process tree, less set-up before the spawn
    assert 0.8 * evaluation.worker.wall_seconds <= sum(phases.values()) <= evaluation.worker.wall_seconds + 0.01


def test_the_run_sums_each_phase_over_its_workers():
    workers = [WorkerRecord(wall_seconds=3.0, phases={"start": 1.0, "verify": 2.0}),
               WorkerRecord(wall_seconds=5.0, phases={"start": 1.5, "benchmark": 3.0})]
    assert worker_cost(workers) == {"wall": 8.0, "start": 2.5, "verify": 2.0, "benchmark": 3.0}
    assert worker_cost([]) == {"wall": 0.0}


def test_the_run_sums_the_judges_verify_steps_over_every_case_of_every_evaluation():
    def evaluation(*metrics: dict) -> Evaluation:
        return Evaluation(label="candidate", status=EvaluationStatus.OK,
                          cases=[CaseMeasurement(case_id=f"c{i}", protected=True, weight=1.0, metrics=m)
                                 for i, m in enumerate(metrics)])

    evaluations = [evaluation({"verify.record_first_seconds": 4.0, "verify.replay_seconds": 0.5, "atol": 1e-5},
                              {"verify.record_first_seconds": 1.0, "benchmark.warmup_seconds": 0.3}),
                   evaluation({"verify.record_first.candidate_warm_call_seconds": 2.5, "verify.flag": True})]
    assert verify_cost(evaluations) == {"record_first": 5.0, "record_first.candidate_warm_call": 2.5, "replay": 0.5}
    assert verify_cost([]) == {}


def test_a_step_clock_adds_up_each_step_and_keeps_only_plausible_figures_from_the_candidate():
    clock = StepClock()
    with clock.step("check"):
        pass
    clock.add("check", 1.0)
    clock.add("replay", 0.25)
    assert clock.metrics()["verify.replay_seconds"] == 0.25
    assert 1.0 <= clock.metrics()["verify.check_seconds"] < 1.1
    # the candidate process's own account: numbers it could make up, kept only as plain finite seconds
    assert candidate_reported({"cuda": 1.5, "warm_call": 2, "recorded_call": 0.01, "other": 9.0}) == \
        {"candidate_cuda": 1.5, "candidate_warm_call": 2.0, "candidate_recorded_call": 0.01}
    assert candidate_reported({"cuda": float("nan"), "warm_call": -1.0, "recorded_call": True}) == {}
    assert candidate_reported({"cuda": 1e9}) == {}
    assert candidate_reported("fast") == {} and candidate_reported(None) == {}


def test_gate_cost_reads_a_recorded_run_and_counts_what_triage_rejected(capsys):
    """scripts/gate_cost.py on the H200 matmul tune recorded with triage (docs/results): six gated candidates,
    four rejected on their first run, a median gated experiment of one worker."""
    import importlib.util

    from tests.conftest import PROJECT_ROOT

    spec = importlib.util.spec_from_file_location("gate_cost", PROJECT_ROOT / "scripts" / "gate_cost.py")
    gate_cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gate_cost)
    recorded = PROJECT_ROOT / "docs/results/2026-12-06-h200-triage-and-tlx-tunes/matmul_tune_result.json.gz"
    row = gate_cost.row("matmul", gate_cost.load(recorded))
    assert (row["gated"], row["triaged"], row["median_gated_workers"], row["workers"]) == (6, 4, 1, 15)
    assert 0.0 <= row["median_outside_workers_s"] < row["median_gated_wall_s"]
    assert row["median_gated_wall_s"] < 10.0 and row["stopping_reason"] == "provider_exhausted"
    # the first recording, before the fork server warmed torch's dispatch: 34.1 of 52.8 verify-seconds
    assert 2.2 < row["first_recording_s_per_worker"] < 2.4 < row["verify_s_per_worker"]
    assert gate_cost.main([str(recorded)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("| run | gated | triaged | reused |") and "| 6 | 4 | 0 |" in printed[2]
    # candidates compile ahead refused before any worker are not gated: an H100 matmul tune refused three
    later = PROJECT_ROOT / "docs/results/2026-12-07-h100-deferred-profile-and-triton-key/matmul_tune-result.json.gz"
    result = gate_cost.load(later)
    refused = [e for e in result["experiments"] if (e.get("decision") or {}).get("reason", "").startswith(
        "build_failed: compile ahead")]
    assert len(refused) == 3 and gate_cost.row("matmul", result)["gated"] == 4
    # an H100 replay of grid configurations not compiled ahead: half of each gated wall was the host's compile
    # ahead, before the one worker; the tuner's screened candidates, compiled by screening, had none
    throughput = PROJECT_ROOT / "docs/results/2026-12-07-h100-gate-throughput"
    replayed = gate_cost.row("replay", gate_cost.load(throughput / "replay-result.json.gz"))
    screened = gate_cost.row("tune", gate_cost.load(throughput / "tune-result.json.gz"))
    assert (replayed["gated"], screened["gated"]) == (54, 6)
    assert 3.5 < replayed["median_outside_workers_s"] < 4.0 and screened["median_outside_workers_s"] < 0.1
