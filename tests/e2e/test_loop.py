"""The optimization loop end to end through the real CLI and real worker subprocesses (synthetic bundle)."""

from __future__ import annotations

import json
import signal

import pytest

from tests.conftest import SYNTHETIC, run_cli, synthetic_args, synthetic_kernel, write_candidates

pytestmark = pytest.mark.timeout(300)

FASTER = synthetic_kernel(50.0)
INCORRECT = synthetic_kernel(20.0, body="return [v * 3.0 for v in values]")
DUPLICATE = FASTER.replace('"""Synthetic candidate."""', '"""Synthetic candidate."""\n# reworded comment only')
SLOWER = synthetic_kernel(150.0)


def test_promotes_faster_rejects_incorrect_and_duplicate(tmp_path, out_dir):
    replay = write_candidates(tmp_path / "cands", [FASTER, INCORRECT, DUPLICATE],
                              [{"hypothesis": "fewer cycles", "evidence": "baseline median 100us", "change": "halve latency",
                                "expected_effect": "2x", "risk": "low"}])
    run = run_cli(*synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay, "--max-rounds", "3"))
    assert run.returncode == 0, run.stderr
    result = run.result
    assert result["success"] is True
    assert result["winner_experiment_id"] == "r001-c000"
    assert result["stopping_reason"] == "provider_exhausted"
    decisions = run.decisions()
    assert decisions["r001-c000"] == "promoted"
    assert decisions["r001-c001"] == "rejected"
    assert decisions["r002-c000"] == "duplicate"
    assert decisions["final"] == "revalidated"
    incorrect = run.experiment("r001-c001")
    assert "incorrect" in incorrect["decision"]["reason"]
    assert "duplicate of r001-c000" in run.experiment("r002-c000")["decision"]["reason"]
    # artifacts are written before dedup, patches show the delta against the incumbent and the baseline
    for experiment_id in ("r001-c000", "r001-c001", "r002-c000"):
        directory = out_dir / "experiments" / experiment_id
        assert (directory / "kernel.py").exists()
        assert (directory / "incremental.patch").exists() and (directory / "cumulative.patch").exists()
        assert json.loads((directory / "result.json").read_text())["experiment_id"] == experiment_id
    assert "+LATENCY_US = 50.0" in (out_dir / "experiments/r001-c000/incremental.patch").read_text()
    assert "experiments/r001-c000/kernel.py" in (out_dir / "experiments/r001-c001/incremental.patch").read_text()
    assert (out_dir / "best_kernel.py").read_text() == FASTER
    # statistics persisted, not recomputed by readers
    promoted = run.experiment("r001-c000")
    candidate = next(e for e in promoted["evaluations"] if e["label"] == "candidate")
    stats = candidate["cases"][0]["stats"]
    assert set(stats) >= {"n", "median", "p95", "mean", "cv", "min", "max"} and stats["n"] >= 30
    assert len(candidate["cases"][0]["samples_us"]) == stats["n"]
    # profiling is on, but no profiler measured the untouched kernel on this machine: the run requires no
    # evidence, so the promoted candidate costs no profile worker; triage measured it first, then the incumbent
    assert [e["label"] for e in promoted["evaluations"]] == ["candidate", "incumbent"]
    assert promoted["statistics"]["passes"] is True
    # the layer-7 report opens the result
    report = result["report"]
    assert report["output_dir"] == str(out_dir.resolve())
    assert {c["case_id"] for c in report["workload"]} == {"small", "large"}
    assert all(c["speedup"] and c["speedup"] > 1.5 for c in report["workload"])
    # output directory contract
    for name in ("result.json", "experiments.json", "best_kernel.py", "run.json", "live.log", "journal.jsonl",
                 "bundle/harness.py", "bundle/cases.json", "bundle/target.json", "baseline_profile.json",
                 "best_profile.json"):
        assert (out_dir / name).exists(), name
    manifest = json.loads((out_dir / "run.json").read_text())
    assert set(manifest["bundle"]["sha256"]) >= {"harness.py", "cases.json", "target.json", "kernel.py"}
    # live log: metadata, per-case figures, decisions; never kernel source
    log = (out_dir / "live.log").read_text()
    assert log == "".join(line + "\n" for line in run.stderr.splitlines() if line.startswith("[tlx-agent]"))
    assert "hypothesis='fewer cycles'" in log and "risk='low'" in log
    assert "median=" in log and "p95=" in log and "cv=" in log and "speedup=" in log
    assert "r001-c000 status=promoted" in log
    assert "return [v * 2.0" not in log
    assert all(json.loads(line)["event"] for line in (out_dir / "journal.jsonl").read_text().splitlines())


def test_no_winner_exits_2_and_continues_through_rounds(tmp_path, out_dir):
    replay = write_candidates(tmp_path / "cands", [SLOWER, synthetic_kernel(140.0), synthetic_kernel(130.0)])
    run = run_cli(*synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay, "--max-rounds", "3",
                                  "--candidates-per-round", "1"))
    assert run.returncode == 2, run.stderr
    assert run.result["stopping_reason"] == "round_budget_exhausted"
    assert run.result["winner_experiment_id"] == "baseline"
    decisions = run.decisions()
    assert [decisions[f"r00{i}-c000"] for i in (1, 2, 3)] == ["rejected"] * 3
    # each 30-50 % slower: rejected on its first run (triage), against the 1.01x threshold less its margin
    reason = run.experiment("r003-c000")["decision"]["reason"]
    assert reason.startswith("triaged on its first run") and "the 1.0100x threshold" in reason
    assert [e["label"] for e in run.experiment("r003-c000")["evaluations"]] == ["candidate"]
    assert (out_dir / "best_kernel.py").read_text() == (SYNTHETIC / "kernel.py").read_text()


@pytest.mark.slow  # real CLI and workers, over 5 s: it waits out a deadline
def test_time_budget_stops_the_run(tmp_path, out_dir):
    sleepy = [synthetic_kernel(200.0 + i, prelude="import time\ntime.sleep(4)\n") for i in range(7)]
    replay = write_candidates(tmp_path / "cands", sleepy)
    args = synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay, "--max-rounds", "5")
    args[args.index("--max-total-seconds") + 1] = "8"
    run = run_cli(*args)
    assert run.returncode == 2, run.stderr
    assert run.result["stopping_reason"] == "time_budget_exhausted", run.stderr
    assert len(run.result["experiments"]) < 8
    assert run.result["wall_seconds"] < 15
    # the run stops before a candidate whose workers cannot finish, instead of cutting one off halfway: only the
    # first candidate, whose cost nothing measured yet (its import sleeps 4 s of an 8 s run), may be cut off
    assert "time budget: the next candidate needs about" in run.stderr
    assert [e["experiment_id"] for e in run.result["experiments"]] in (["baseline"], ["baseline", "r001-c000"])


@pytest.mark.slow  # real CLI and workers, over 5 s: it waits out a deadline
def test_hanging_worker_is_killed_at_its_deadline_and_the_run_continues(tmp_path, out_dir):
    hang = synthetic_kernel(10.0, body="import time; time.sleep(3600)")
    replay = write_candidates(tmp_path / "cands", [hang, FASTER])
    # the limit holds for every worker of the run (baseline and incumbents too): 10 s leaves a loaded 2-core
    # machine room for an honest worker's start, and profiles are off because they are not what this tests
    args = synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay, "--no-profile")
    args[args.index("--max-candidate-seconds") + 1] = "10"
    run = run_cli(*args)
    assert run.returncode == 0, run.stderr
    hung = run.experiment("r001-c000")
    candidate = next(e for e in hung["evaluations"] if e["label"] == "candidate")
    assert candidate["status"] == "timeout"
    assert "verify" in candidate["reason"]
    assert run.decisions()["r001-c001"] == "promoted"


def test_crashing_worker_is_classified_and_the_run_continues(tmp_path, out_dir):
    crash = synthetic_kernel(10.0, body="import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    replay = write_candidates(tmp_path / "cands", [crash, FASTER])
    run = run_cli(*synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay))
    assert run.returncode == 0, run.stderr
    crashed = next(e for e in run.experiment("r001-c000")["evaluations"] if e["label"] == "candidate")
    assert crashed["status"] == "crashed"
    assert "SIGSEGV" in crashed["reason"]
    assert crashed["worker"]["signal"] == signal.SIGSEGV


def test_finalist_that_fails_revalidation_is_not_the_winner(tmp_path, out_dir):
    marker = tmp_path / "already-measured"
    flaky = synthetic_kernel(
        "LATENCY", prelude=(f"import os\nMARKER = {str(marker)!r}\nLATENCY = 300.0 if os.path.exists(MARKER) else 40.0\n"
                            "if not os.path.exists(MARKER):\n    open(MARKER, 'w').close()\n"))
    replay = write_candidates(tmp_path / "cands", [flaky])
    # A/B/A: with triage's B/A/B the gate itself would time the flaky candidate twice and reject it
    run = run_cli(*synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay, "--isolation", "off",
                                  "--no-triage"))
    assert run.returncode == 2, run.stderr
    assert run.result["stopping_reason"] == "finalist_revalidation_failed"
    assert run.result["winner_experiment_id"] == "baseline"
    assert run.decisions()["r001-c000"] == "promoted"
    assert run.decisions()["final"] == "rejected"
    assert (out_dir / "best_kernel.py").read_text() == (SYNTHETIC / "kernel.py").read_text()


def test_output_dir_holding_a_run_is_refused(tmp_path, out_dir):
    replay = write_candidates(tmp_path / "cands", [FASTER])
    first = run_cli(*synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay, "--max-rounds", "1"))
    assert first.returncode == 0, first.stderr
    second = run_cli(*synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay))
    assert second.returncode == 1
    assert "already holds a run" in second.stderr
    assert json.loads(second.stdout)["success"] is False


def test_schema_command_prints_every_model():
    run = run_cli("schema")
    assert run.returncode == 0
    schemas = json.loads(run.stdout)
    assert {"case", "target", "budget", "profile_request", "worker_command", "worker_event", "run_result"} <= set(schemas)


def test_swapping_the_incumbent_source_stops_the_run(tmp_path, out_dir):
    """Without the sandbox a candidate can reach experiments/baseline/kernel.py; the run must notice."""
    swap = synthetic_kernel(
        10.0, prelude=("import os\n"
                       "_b = os.path.join(os.getcwd().split('/experiments/')[0], 'experiments', 'baseline', 'kernel.py')\n"
                       "open(_b, 'a').write('\\nLATENCY_US = 1e6\\n')\n"))
    replay = write_candidates(tmp_path / "cands", [swap])
    run = run_cli(*synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay, "--isolation", "off",
                                  "--skip-validation"))
    assert run.returncode == 1, run.stderr
    assert "experiments/baseline/kernel.py changed after it was written" in run.stderr
