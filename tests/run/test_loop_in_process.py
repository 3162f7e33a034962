"""The run loop in-process: the real `OptimizationRun`, referee, ledger and provider, with a fake evaluator that
answers each evaluation with synthetic samples (tests/run/fake_evaluator.py). What a decision sequence does
(promote, reject, confirm, revalidate, stop) is shown here in milliseconds; what only a worker can show stays with
the CLI tests that start workers (tests/e2e)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from orchestrator.decision.simulate import (
    Policy,
    first_difference,
    recorded_seed,
    recorded_view,
    simulate_run,
)
from orchestrator.ledger.records import load_records
from orchestrator.providers.base import Proposal, ProposalContext, ProviderExhausted
from orchestrator.providers.replay import ReplayProvider
from protocol.bundle import Budget
from protocol.outcome import ExitCode, StoppingReason
from protocol.results import DecisionStatus
from tests.conftest import PROJECT_ROOT, SYNTHETIC, synthetic_kernel, write_candidates
from tests.run.fake_evaluator import recorded, run_in_process, synthetic

pytestmark = pytest.mark.timeout(120)

FASTER = synthetic_kernel(50.0)
INCORRECT = synthetic_kernel(20.0, body="return [v * 3.0 for v in values]")
DUPLICATE = FASTER.replace('"""Synthetic candidate."""', '"""Synthetic candidate."""\n# reworded comment only')
SLOWER = synthetic_kernel(150.0)


def gate_cost_row(result: dict) -> dict:
    """scripts/gate_cost.py's row for a run's result.json."""
    spec = importlib.util.spec_from_file_location("gate_cost", PROJECT_ROOT / "scripts" / "gate_cost.py")
    gate_cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gate_cost)
    return gate_cost.row("run", result)


def replay(tmp_path, sources, metadata=None) -> ReplayProvider:
    return ReplayProvider(write_candidates(tmp_path / "cands", sources, metadata))


def test_promotes_faster_rejects_incorrect_and_duplicate(tmp_path):
    run = run_in_process(SYNTHETIC, tmp_path / "out", replay(tmp_path, [FASTER, INCORRECT, DUPLICATE]), synthetic(),
                         budget=Budget(max_rounds=3, max_total_seconds=3600))
    result = run.result
    assert result.exit_code == ExitCode.OK and result.success
    assert result.winner_experiment_id == "r001-c000"
    assert result.stopping_reason is StoppingReason.PROVIDER_EXHAUSTED
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "promoted", "r001-c001": "rejected",
                               "r002-c000": "duplicate", "final": "revalidated"}
    assert "incorrect" in run.experiment("r001-c001").decision.reason
    assert "duplicate of r001-c000" in run.experiment("r002-c000").decision.reason
    promoted = run.experiment("r001-c000")
    # triage: a candidate is measured first, then the incumbent, decided with the baseline's run before it as the
    # first A (A/B/A on two new workers); the finalist is revalidated A/B/A
    assert [e.label for e in promoted.evaluations] == ["candidate", "incumbent"]
    assert promoted.statistics["reused_incumbent_run"]["label"] == "baseline"
    assert promoted.statistics["passes"] is True and promoted.statistics["between_run_noise"]["dof"] >= 0
    # the workers the run asked for, in order: the incorrect candidate's first run ends its measuring, and no
    # profile worker (no profiler measured the synthetic baseline, so there is nothing to judge one against)
    assert [(r.experiment_id, r.tag) for r in run.evaluator.requests] == [
        ("baseline", "baseline"), ("r001-c000", "0-candidate"), ("r001-c000", "1-incumbent"),
        ("r001-c001", "0-candidate"),
        ("final", "0-incumbent"), ("final", "1-final"), ("final", "2-incumbent")]
    assert (run.output_dir / "best_kernel.py").read_text() == FASTER
    assert json.loads((run.output_dir / "experiments/r001-c000/result.json").read_text())["experiment_id"] == "r001-c000"
    assert "r001-c000 status=promoted" in (run.output_dir / "live.log").read_text()


# ---- recorded runs: the loop and `simulate` are the same referee ----------------------------------------------

DATA = PROJECT_ROOT / "docs" / "data"
RECORDED_RUNS = {"matmul_tune": DATA / "h200-records-2026-12-01" / "matmul_tune",
                 "softmax_tune": DATA / "h200-records-2026-12-01" / "softmax_tune",
                 "va_replay": DATA / "h200-records-2026-12-01" / "va_replay",
                 "synthetic-run": PROJECT_ROOT / "tests" / "decision" / "fixtures" / "synthetic-run"}


class RecordedProvider:
    """Proposes what a recorded run measured, one placeholder source per experiment (a duplicate proposes its
    original's again), and is exhausted where the record ends."""

    name = "recorded"
    concurrent = False

    def __init__(self, experiments) -> None:
        self.by_id = {record.experiment_id: record for record in experiments}

    @staticmethod
    def source(experiment_id: str) -> str:
        return f'"""Stands for {experiment_id}."""\n\nLATENCY_US = 1.0\n'

    async def propose(self, context: ProposalContext) -> Proposal:
        record = self.by_id.get(context.experiment_id)
        if record is None:
            raise ProviderExhausted("the record ends here")
        original = record.decision.reason.removeprefix("duplicate of ") \
            if record.decision.status is DecisionStatus.DUPLICATE else record.experiment_id
        return Proposal(source=self.source(original), metadata=record.metadata)

    async def aclose(self) -> None:
        pass


def recorded_bundle(directory, records) -> None:
    directory.mkdir()
    (directory / "kernel.py").write_text(RecordedProvider.source("baseline"))
    (directory / "harness.py").write_text((SYNTHETIC / "harness.py").read_text())
    (directory / "cases.json").write_text(json.dumps([case.model_dump(mode="json") for case in records.cases]))
    (directory / "target.json").write_text((SYNTHETIC / "target.json").read_text())


@pytest.mark.parametrize("max_case_regression", [1.0, 0.02])
@pytest.mark.parametrize("name", sorted(RECORDED_RUNS))
def test_the_loop_fed_a_recorded_run_decides_as_simulate_does(tmp_path, name, max_case_regression):
    """The live loop on a recorded run's evaluations (each worker answered with the run it recorded, each test with
    the recorded seed) takes every decision `simulate` takes on the records, bit for bit: one referee. With the
    per-case regression gate off, as the runs were decided, both reproduce the records; with it on, they agree up
    to the first promotion it turns down (after that the loop's incumbent, and so its noise, is another)."""
    records = load_records(RECORDED_RUNS[name])
    manifest = json.loads((RECORDED_RUNS[name] / "run.json").read_text())
    recorded_budget = Budget(**manifest["budget"])
    policy = Policy(noise_model="learned", max_case_regression=max_case_regression)
    replay = simulate_run(records.experiments, records.cases, settings=records.settings, policy=policy)
    seeds = {record.experiment_id: recorded_seed(record.statistics) for record in records.experiments}
    recorded_bundle(tmp_path / "bundle", records)
    run = run_in_process(
        tmp_path / "bundle", tmp_path / "out", RecordedProvider(records.experiments), recorded(records.experiments),
        budget=recorded_budget.model_copy(update={"max_total_seconds": 1e6, "max_case_regression": max_case_regression}),
        profile=manifest["profile"], schedule=manifest["schedule"], confirm_pairs=manifest["confirm_pairs"],
        triage=manifest.get("triage", False), test_seed=lambda experiment_id: seeds[experiment_id] or 0)
    compared = []
    for row in replay.experiments:  # until the replay judges runs the loop did not make
        if row.after_divergence:
            break
        compared.append(row)
        if any("confirmation pair" in note for note in row.notes):
            break  # a pair recorded and not asked for: the replay learns from it, the loop never measured it
    assert compared and all(row.simulated is not None for row in compared)
    for row in compared:
        decided = recorded_view(run.experiment(row.experiment_id))
        assert first_difference(row.simulated, decided) is None, (row.experiment_id, row.simulated, decided)
        assert decided.lower_bound == row.simulated.lower_bound and decided.learned_sd == row.simulated.learned_sd
    assert len(compared) == len(replay.experiments) or name == "softmax_tune"


def test_triage_rejects_a_slower_candidate_on_one_run_and_simulate_replays_the_run_exactly(tmp_path):
    """With triage (the default) a candidate is measured first: the slower one is rejected on that one run, the
    others measured once more side by side (the incumbent's last run reused as their first A) and decided. `simulate` on the run's records, with the
    run.json that says it triaged, takes the same decisions; told the run did not triage, it names the records it
    cannot replay instead of deciding them on runs that never happened."""
    slightly_slower = synthetic_kernel(101.0)  # within triage's margin: measured in full, rejected
    run = run_in_process(SYNTHETIC, tmp_path / "out", replay(tmp_path, [SLOWER, slightly_slower, FASTER]),
                         synthetic(), budget=Budget(max_rounds=3, candidates_per_round=1, max_total_seconds=3600))
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "rejected", "r002-c000": "rejected",
                               "r003-c000": "promoted", "final": "revalidated"}
    triaged = run.experiment("r001-c000")
    assert [e.label for e in triaged.evaluations] == ["candidate"]
    assert triaged.decision.gates == {"correct": True, "speedup": False, "case_regression": False, "triage": False}
    assert triaged.statistics["triage"]["slower_cases"] == ["small", "large"]
    assert "between_run_noise" in triaged.statistics
    assert triaged.aggregate_speedup == pytest.approx(100.0 / 150.0, rel=0.02)
    # let through: decided on the incumbent's last run (the baseline's), its own run and one more incumbent run
    assert [e.label for e in run.experiment("r002-c000").evaluations] == ["candidate", "incumbent"]
    assert "triage" not in run.experiment("r002-c000").decision.gates
    assert [(r.experiment_id, r.tag) for r in run.evaluator.requests][:3] == [
        ("baseline", "baseline"), ("r001-c000", "0-candidate"), ("r002-c000", "0-candidate")]
    assert 'r001-c000 status=triaged reason="triaged on its first run' in (run.output_dir / "live.log").read_text()

    records = load_records(run.output_dir)
    assert records.settings.triage is True and records.settings.reuse_incumbent_run is True
    cost = gate_cost_row(run.result.model_dump(mode="json"))  # scripts/gate_cost.py counts them too
    assert (cost["gated"], cost["triaged"], cost["reused"]) == (3, 1, 2)
    replayed = simulate_run(records.experiments, records.cases, settings=records.settings)
    assert replayed.all_match, [(row.experiment_id, row.first_difference, row.notes) for row in replayed.experiments]
    # a stricter policy triages the candidate the run measured in full: the runs it no longer asks for were
    # measured all the same, and the next decision learns its noise from them as the run did
    strict = simulate_run(records.experiments, records.cases, settings=records.settings,
                          policy=Policy(min_speedup=1.2))
    rows = {row.experiment_id: row for row in strict.experiments}
    assert rows["r002-c000"].simulated.gates.get("triage") is False
    assert any("not asked for by this policy" in note for note in rows["r002-c000"].notes)
    assert rows["r003-c000"].simulated.noise_dof == rows["r003-c000"].recorded.noise_dof
    untriaged = simulate_run(records.experiments, records.cases,
                             settings=records.settings.model_copy(update={"triage": False}))
    assert not untriaged.all_match
    assert any("not decided again" in note for row in untriaged.experiments for note in row.notes)


def test_without_the_reuse_a_candidate_triage_lets_through_costs_three_workers_and_replays_exactly(tmp_path):
    """`--no-reuse-incumbent-run`: a candidate triage lets through is measured candidate/incumbent/candidate; run.json
    says so, and `simulate` replays each decision on the runs the run measured."""
    run = run_in_process(SYNTHETIC, tmp_path / "out", replay(tmp_path, [synthetic_kernel(101.0), FASTER]),
                         synthetic(), budget=Budget(max_rounds=2, candidates_per_round=1, max_total_seconds=3600),
                         reuse_incumbent_run=False)
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "rejected", "r002-c000": "promoted",
                               "final": "revalidated"}
    for experiment_id in ("r001-c000", "r002-c000"):
        record = run.experiment(experiment_id)
        assert [e.label for e in record.evaluations] == ["candidate", "incumbent", "candidate"]
        assert "reused_incumbent_run" not in record.statistics
    records = load_records(run.output_dir)
    assert records.settings.triage is True and records.settings.reuse_incumbent_run is False
    replayed = simulate_run(records.experiments, records.cases, settings=records.settings)
    assert replayed.all_match, [(row.experiment_id, row.first_difference, row.notes) for row in replayed.experiments]
