"""Replaying recorded runs' decisions from their records (no worker).

Recorded runs used here:
- docs/data/h200-{vector-add,softmax-tune,matmul-tune}-result.json: H200 runs, decided before the run learnt
  its between-run noise; the softmax and matmul files kept each run's statistics but dropped raw samples.
- docs/data/h200-records-2026-12-01/{matmul_tune,softmax_tune,va_replay}/: complete H200 records (raw samples,
  learnt noise, a confirmation pair in softmax, a deep profile in vector_add) of `scripts/gpu/h200_record_and_simulate.sh`.
- tests/decision/fixtures/synthetic-run/: a run of the synthetic CPU bundle (learnt noise, a confirmation
  pair, a deep profile, an incorrect candidate, a duplicate; recorded before the noise was learnt per case,
  so its records hold no `by_case` and replay with the noisiest case's noise for every case), made with
  `tlx-agent --kernel tests/e2e/synthetic/kernel.py --harness tests/e2e/synthetic/harness.py
  --cases tests/e2e/synthetic/cases.json --target tests/e2e/synthetic/target.json --provider replay
  --replay-dir CANDIDATES --max-rounds 3 --min-speedup 1.004 --no-commit-winner --output-dir OUT`
  where CANDIDATES holds synthetic kernels of 90, (incorrect), 90 (comment only), 89.5 and 95 µs; only
  experiments.json, result.json, run.json and journal.jsonl are kept.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from orchestrator.decision.simulate import Policy, RunReplay, simulate_run, split_runs
from orchestrator.ledger.records import RecordsError, RunRecords, load_records
from protocol.results import DecisionStatus
from tests.conftest import PROJECT_ROOT, run_cli

DATA = PROJECT_ROOT / "docs" / "data"
SYNTHETIC_RUN = Path(__file__).resolve().parent / "fixtures" / "synthetic-run"
H200_RUNS = {"h200-vector-add-result.json": ["r001-c000", "r001-c001", "r002-c000", "final"],
             "h200-softmax-tune-result.json": ["r001-c000", "r001-c001"],
             "h200-matmul-tune-result.json": ["r001-c000", "r002-c000", "final"]}
DROPPED_NOISE = "noise gate and lower bound (raw samples dropped from this file)"


def replay(path: Path, policy: Policy | None = None) -> tuple[RunRecords, RunReplay]:
    records = load_records(path)
    return records, simulate_run(records.experiments, records.cases, settings=records.settings, policy=policy)


def row(result: RunReplay, experiment_id: str):
    return next(r for r in result.experiments if r.experiment_id == experiment_id)


# Decisions recorded before the per-case regression gate that it fails when replayed: each was rejected anyway
# (a candidate slower overall), except softmax_tune's r003-c000 (tests/decision/test_case_regression.py).
CASE_GATE_FAILS = {"h200-matmul-tune-result.json": {"r002-c000"},
                   "h200-softmax-tune-result.json": {"r001-c000", "r001-c001"},
                   "matmul_tune": {"r002-c000", "r003-c000", "r005-c000"}, "softmax_tune": {"r003-c000"},
                   "synthetic-run": {"r003-c000"}}


def assert_reproduced(result: RunReplay, name: str = "") -> None:
    """Every decision reproduced; one that the per-case gate (newer than the record) fails is reproduced with the
    gate off and, with it on, differs from the record only in that gate unless it was a promotion."""
    fails = CASE_GATE_FAILS.get(name, set())
    for decided in result.experiments:
        recorded, simulated = decided.recorded, decided.simulated
        assert simulated is not None, decided.notes
        assert (simulated.gates.get("case_regression") is False) == (decided.experiment_id in fails), \
            decided.experiment_id
        if decided.experiment_id in fails:
            assert decided.reproduced_without_new_gates is True and decided.new_gates == ["case_regression"]
            if recorded.status is not simulated.status:
                continue  # a promotion the gate turns down (and with it, the confirmation pairs it took)
            assert decided.first_difference == "gates.case_regression"
        else:
            assert decided.match and decided.first_difference is None
        assert simulated.status == recorded.status, decided.experiment_id
        assert {gate: simulated.gates.get(gate) for gate in recorded.gates} == recorded.gates, decided.experiment_id
        assert set(simulated.gates) - set(recorded.gates) <= set(decided.new_gates)
        if recorded.aggregate_speedup is None:
            assert simulated.aggregate_speedup is None
        else:
            assert math.isclose(simulated.aggregate_speedup, recorded.aggregate_speedup, rel_tol=0, abs_tol=1e-9)
    assert result.all_reproduced
    promotions_changed = [r.experiment_id for r in result.experiments if r.simulated.status != r.recorded.status]
    assert result.all_match == (not fails)
    assert result.diverges_at == (promotions_changed[0] if promotions_changed else None)


@pytest.mark.parametrize("name", sorted(H200_RUNS))
def test_h200_runs_reproduce_every_recorded_decision(name):
    records, result = replay(DATA / name)
    assert [r.experiment_id for r in result.experiments] == H200_RUNS[name]
    assert_reproduced(result, name)
    measured = [r for r in result.experiments if r.replayed]
    if name == "h200-vector-add-result.json":
        # raw samples kept: the test itself is re-run with the recorded seed and lands on the same bound
        assert records.warnings == []
        assert all(r.carried == [] for r in measured)
        for decided in measured:
            assert decided.simulated.lower_bound == decided.recorded.lower_bound
        assert row(result, "r002-c000").carried == ["decision (no measurement)"]
        assert row(result, "r001-c001").recorded.gates == {"correct": False}
    else:
        # samples dropped by hand from these files: every gate but the noise gate is decided again
        assert "kept their statistics but not their raw samples" in records.warnings[0]
        assert all(DROPPED_NOISE in r.carried for r in measured)
    if name == "h200-softmax-tune-result.json":
        assert all("profile veto" in r.carried and r.simulated.gates["profile"] is False for r in measured)


H200_RECORDS = DATA / "h200-records-2026-12-01"
H200_COMPLETE_RUNS = {"matmul_tune": ["r001-c000", "r002-c000", "r003-c000", "r004-c000", "r005-c000", "final"],
                      "softmax_tune": ["r001-c000", "r002-c000", "r003-c000", "final"],
                      "va_replay": ["r001-c000", "final"]}


@pytest.mark.parametrize("name", sorted(H200_COMPLETE_RUNS))
def test_complete_h200_runs_reproduce_every_decision_bit_for_bit(name):
    """Raw samples kept: the bootstrap is re-run with each recorded seed on the learnt noise of the run so far."""
    records, result = replay(H200_RECORDS / name)
    assert records.warnings == []
    assert [r.experiment_id for r in result.experiments] == H200_COMPLETE_RUNS[name]
    assert_reproduced(result, name)
    for decided in result.experiments:
        assert decided.carried == []
        if decided.simulated.status != decided.recorded.status:
            continue  # softmax_tune r003-c000, turned down before its confirmation pair (test_case_regression.py)
        assert decided.simulated.lower_bound == decided.recorded.lower_bound
        assert decided.simulated.learned_sd == decided.recorded.learned_sd


def test_current_run_reproduces_learnt_noise_confirmation_pair_and_deep_profile():
    records, result = replay(SYNTHETIC_RUN)
    assert records.warnings == []
    assert records.settings.source.endswith("run.json") and records.settings.min_speedup == 1.004
    assert_reproduced(result, "synthetic-run")
    confirmed = row(result, "r002-c001")
    labels = [e.label for e in next(e for e in records.experiments if e.experiment_id == "r002-c001").evaluations]
    assert labels == ["incumbent", "candidate", "incumbent", "candidate", "incumbent", "deep_profile"]
    assert confirmed.simulated.status is DecisionStatus.PROMOTED and confirmed.notes == []
    # the noise each decision learnt from the run so far grows with the run: 2, 7, 9, 12 degrees of freedom
    assert [row(result, i).simulated.noise_dof for i in ("r001-c000", "r002-c001", "r003-c000", "final")] == \
        [2, 7, 9, 12]
    for decided in result.experiments:
        assert decided.simulated.lower_bound == decided.recorded.lower_bound
        assert decided.simulated.learned_sd == decided.recorded.learned_sd


def test_without_the_confirmation_pair_the_promotion_is_not_reproduced():
    records = load_records(SYNTHETIC_RUN)
    no_pairs = records.settings.model_copy(update={"confirm_pairs": 0})
    result = simulate_run(records.experiments, records.cases, settings=no_pairs)
    confirmed = row(result, "r002-c001")
    assert confirmed.simulated.status is DecisionStatus.REJECTED and confirmed.first_difference == "status"
    assert confirmed.simulated.gates["noise"] is False
    assert confirmed.notes == ["1 recorded confirmation pair(s) not asked for by this policy"]
    assert not result.all_match


def test_min_speedup_above_a_promoted_candidates_speedup_flips_it_and_the_run_diverges():
    _, recorded = replay(DATA / "h200-vector-add-result.json")
    promoted = row(recorded, "r001-c000").recorded
    assert promoted.lower_bound < 3.07 < promoted.aggregate_speedup < 3.1
    # the minimum is a bar for the point estimate: between the lower bound and the point it changes nothing
    _, between = replay(DATA / "h200-vector-add-result.json", Policy(min_speedup=3.07))
    assert between.all_match
    _, above = replay(DATA / "h200-vector-add-result.json", Policy(min_speedup=3.1))
    flipped = row(above, "r001-c000")
    assert flipped.simulated.status is DecisionStatus.REJECTED and flipped.first_difference == "status"
    assert flipped.simulated.gates["speedup"] is False and flipped.simulated.gates["noise"] is True
    assert flipped.simulated.lower_bound == promoted.lower_bound  # the test does not depend on the minimum
    assert "below the 3.1000x threshold" in flipped.simulated.reason
    assert above.diverges_at == "r001-c000" and not above.all_match
    assert [r.after_divergence for r in above.experiments] == [False, True, True, True]
    assert row(above, "final").simulated.status is DecisionStatus.REJECTED


def test_min_speedup_override_flips_a_run_without_raw_samples():
    _, result = replay(DATA / "h200-matmul-tune-result.json", Policy(min_speedup=1.25))
    flipped = row(result, "r001-c000")
    assert (flipped.recorded.status, flipped.simulated.status) == (DecisionStatus.PROMOTED, DecisionStatus.REJECTED)
    assert result.diverges_at == "r001-c000"


def test_noise_overrides_need_raw_samples():
    _, result = replay(DATA / "h200-matmul-tune-result.json", Policy(noise_model="learned"))
    assert all(r.simulated is None and r.first_difference == "records" for r in result.experiments)
    assert "a confidence or noise override needs the noise test re-run" in result.experiments[0].notes[0]
    _, learned = replay(DATA / "h200-vector-add-result.json", Policy(noise_model="learned"))
    # today's learnt noise would have kept every decision of the first H200 run, with other bounds
    assert [r.simulated.status for r in learned.experiments] == [r.recorded.status for r in learned.experiments]
    assert row(learned, "r001-c000").first_difference == "lower_bound"
    assert row(learned, "r001-c000").simulated.noise_dof == 2


def copy_run(tmp_path: Path) -> Path:
    return Path(shutil.copytree(SYNTHETIC_RUN, tmp_path / "run"))


def test_a_torn_last_journal_line_is_reported_and_the_replay_goes_on(tmp_path):
    run = copy_run(tmp_path)
    journal = run / "journal.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    records, result = replay(run)
    assert records.warnings == [f"{journal} line {len(lines)} is torn (the run stopped while writing it); left out"]
    assert len(records.journal) == len(lines) - 1
    assert_reproduced(result, "synthetic-run")


def test_a_damaged_journal_line_before_the_last_is_an_error(tmp_path):
    run = copy_run(tmp_path)
    journal = run / "journal.jsonl"
    lines = journal.read_text().splitlines()
    lines[2] = lines[2][:40]
    journal.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordsError, match=rf"^{journal} line 3 is unreadable \("):
        load_records(run)


def test_a_journal_that_orders_the_runs_otherwise_is_reported(tmp_path):
    run = copy_run(tmp_path)
    journal = run / "journal.jsonl"
    lines = journal.read_text().splitlines()
    runs = [i for i, line in enumerate(lines) if json.loads(line)["event"] == "evaluation"]
    first, second = runs[0], runs[1]  # the baseline's run, then r001-c000's first incumbent run
    lines[first], lines[second] = lines[second], lines[first]
    journal.write_text("\n".join(lines) + "\n")
    records = load_records(run)
    assert records.warnings == [f"{journal}: benchmarked run 0 is ('r001-c000', 'incumbent') in the journal but "
                                "('baseline', 'baseline') in the records; the noise history follows the records"]

def test_a_run_json_the_replay_cannot_use_is_an_error_naming_it(tmp_path):
    run = copy_run(tmp_path)
    manifest = json.loads((run / "run.json").read_text())
    manifest["schedule"] = "abx"
    (run / "run.json").write_text(json.dumps(manifest))
    with pytest.raises(RecordsError, match=rf"^{run / 'run.json'}: field 'schedule' is invalid: measurement order"):
        load_records(run)


def tamper_aggregate(run: Path, experiment_id: str, relative: float) -> None:
    listing = run / "experiments.json"
    experiments = json.loads(listing.read_text())
    record = next(e for e in experiments if e["experiment_id"] == experiment_id)
    record["aggregate_speedup"] *= 1.0 + relative
    listing.write_text(json.dumps(experiments))


def test_a_recorded_speedup_off_by_a_millionth_is_not_reproduced(tmp_path):
    run = copy_run(tmp_path)
    tamper_aggregate(run, "r002-c001", 1e-6)
    records, result = replay(run)
    assert row(result, "r002-c001").first_difference == "aggregate_speedup" and not result.all_reproduced
    [line] = [entry.line for entry in records.journal
              if entry.event == "experiment" and entry.experiment_id == "r002-c001"]
    assert records.warnings == [f"{run / 'journal.jsonl'} line {line}: the decision on r002-c001 differs from the "
                                "record's"]


def test_split_runs_reads_the_schedule_then_pairs_and_refuses_other_shapes():
    records = load_records(SYNTHETIC_RUN)
    by_id = {e.experiment_id: e for e in records.experiments}
    confirmed = [e for e in by_id["r002-c001"].evaluations if e.label in ("candidate", "incumbent")]
    initial, pairs = split_runs(confirmed, ["incumbent", "candidate", "incumbent"], "candidate")
    assert [e.label for e in initial] == ["incumbent", "candidate", "incumbent"]
    assert [[e.label for e in pair] for pair in pairs] == [["candidate", "incumbent"]]
    failed = by_id["r001-c001"].evaluations  # incumbent, then the incorrect candidate: nothing after it
    assert split_runs(failed, ["incumbent", "candidate", "incumbent"], "candidate") == (failed, [])
    with pytest.raises(ValueError, match="after a failed run"):
        split_runs([*failed, confirmed[0]], ["incumbent", "candidate", "incumbent"], "candidate")
    with pytest.raises(ValueError, match="should be 'candidate'"):
        split_runs(confirmed, ["candidate", "incumbent"], "candidate")


# ---- through the command line -------------------------------------------------------------------------


def test_cli_reproduces_a_recorded_run():
    run = run_cli("simulate", DATA / "h200-vector-add-result.json", timeout=120)
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["all_match"] is True
    assert [r["experiment_id"] for r in document["experiments"]] == H200_RUNS["h200-vector-add-result.json"]
    assert "4 of 4 decisions reproduced" in run.stderr


def test_cli_override_exits_0_and_shows_what_changed():
    run = run_cli("simulate", DATA / "h200-vector-add-result.json", "--min-speedup", "3.1", timeout=120)
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["all_match"] is False and document["diverges_at"] == "r001-c000"
    assert document["policy"]["min_speedup"] == 3.1
    assert document["experiments"][0]["simulated"]["status"] == "rejected"
    assert "changed: status" in run.stderr


def test_cli_exits_1_when_a_decision_is_not_reproduced(tmp_path):
    run_dir = copy_run(tmp_path)
    tamper_aggregate(run_dir, "r001-c000", 1e-6)
    run = run_cli("simulate", run_dir, timeout=120)
    assert run.returncode == 1
    assert json.loads(run.stdout)["all_match"] is False
    assert json.loads(run.stdout)["all_reproduced"] is False
    assert "DIFFERS: aggregate_speedup" in run.stderr
    assert "4 of 6 decisions reproduced, 1 more without the gates their records predate" in run.stderr


@pytest.mark.parametrize("argv, message", [
    (["simulate", "{broken}"], "{broken} is not valid JSON (line 1, column 3: "),
    (["simulate", "{missing}"], "{missing} does not exist; pass a run's output directory or a result.json"),
    (["simulate", "{run}", "--confidence", "1.5"], "--confidence: Input should be less than 1"),
])
def test_cli_bad_input_is_one_line_and_exit_1(tmp_path, argv, message):
    broken = tmp_path / "result.json"
    broken.write_text("{ not json")
    paths = {"broken": str(broken), "missing": str(tmp_path / "nothing"), "run": str(SYNTHETIC_RUN)}
    run = run_cli(*[arg.format(**paths) for arg in argv], timeout=120)
    assert run.returncode == 1
    assert len(run.stderr.splitlines()) == 1
    assert run.stderr.startswith(f"[tlx-agent] error: {message.format(**paths)}")
    assert json.loads(run.stdout)["success"] is False



def test_records_with_per_case_noise_replay_per_case_and_older_ones_with_the_noisiest(tmp_path):
    """A record written since the run learns noise per case holds `by_case` in `between_run_noise` and is
    replayed that way; one written before replays with the noisiest case's noise for every case, as decided."""
    _records, as_recorded = replay(SYNTHETIC_RUN)
    _records, per_case = replay(SYNTHETIC_RUN, Policy(noise_model="learned"))
    changed = [r.experiment_id for r in per_case.experiments if r.first_difference == "lower_bound"]
    assert changed and as_recorded.all_reproduced  # the two models differ on this run, and the old one reproduces
    newer = tmp_path / "run"
    shutil.copytree(SYNTHETIC_RUN, newer)
    listing = json.loads((newer / "experiments.json").read_text())
    for record in listing:
        noise = (record.get("statistics") or {}).get("between_run_noise")
        if noise is not None:
            noise["by_case"] = {}  # its presence marks the model; the replay learns the values again
    (newer / "experiments.json").write_text(json.dumps(listing))
    _records, newer_replay = replay(newer)
    assert [r.simulated.lower_bound for r in newer_replay.experiments] == \
        [r.simulated.lower_bound for r in per_case.experiments]
    assert [r.experiment_id for r in newer_replay.experiments if r.first_difference == "lower_bound"] == changed


def test_cli_decides_a_measurement_studys_trials_again():
    run = run_cli("simulate", DATA / "measurement-study-2", "--trials", "4", timeout=300)
    assert run.returncode == 0, run.stderr
    study = json.loads(run.stdout)["study"]
    assert sorted(study["outcomes"]) == ["combined", "matmul", "softmax"]  # emitted with sorted keys
    assert study["outcomes"]["combined"]["hidden_regression"] == {**study["outcomes"]["combined"]["hidden_regression"],
                                                                  "promoted": 0, "case_gate_failed": 4}
    assert study["max_case_regression"] == 0.02 and study["trials"] == 4 and study["seed"] == 7
    lines = run.stderr.splitlines()
    assert lines[0].startswith(f"study {DATA / 'measurement-study-2'}: 4 trials per cell, seed 7")
    assert lines[1].split() == ["example", "cell", "promoted", "without", "case", "gate", "case", "gate", "failed",
                                "confirmed"]
    reused = run_cli("simulate", DATA / "measurement-study-2", "--trials", "4", "--reuse-incumbent-run", timeout=300)
    assert reused.returncode == 0, reused.stderr
    assert json.loads(reused.stdout)["study"]["reuse_incumbent_run"] is True
    assert reused.stderr.splitlines()[0].endswith(", the incumbent's last run reused")
    bad = run_cli("simulate", DATA / "measurement-study-2", "--trials", "0", timeout=120)
    assert bad.returncode == 1 and bad.stderr == "[tlx-agent] error: --trials 0: give at least 1 trial per cell\n"


def test_a_record_that_named_an_unfinished_run_correct_false_replays_as_the_same_decision():
    """Before unfinished runs had their own gate, a candidate run cut by the run's deadline was recorded failed
    with `{"correct": False}` (the H100 softmax tune of 2026-12-07, r002-c001); a replay decides it failed with
    `{"completed": False}`, the same decision."""
    from orchestrator.decision.simulate import first_difference, recorded_view
    from protocol.results import Decision, ExperimentRecord
    reason = "timeout: timed out in benchmark (case rows4096_cols4096) after 2.3 s"
    old = ExperimentRecord(experiment_id="r002-c001", decision=Decision(
        status=DecisionStatus.FAILED, reason=reason, gates={"correct": False}))
    wrong = ExperimentRecord(experiment_id="r002-c002", decision=Decision(
        status=DecisionStatus.REJECTED, reason="incorrect: case c", gates={"correct": False}))
    assert recorded_view(old).gates == {"completed": False}
    assert recorded_view(wrong).gates == {"correct": False}
    today = recorded_view(old.model_copy(update={"decision": old.decision.model_copy(
        update={"gates": {"completed": False}})}))
    assert first_difference(recorded_view(old), today) is None
