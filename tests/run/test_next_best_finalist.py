"""A finalist that fails its revalidation: the run revalidates the next-best earlier promotion while a whole
revalidation fits, keeps exactly the winner's content in the checkout, and says so in every record; a resumed run
killed during that fallback ends the same way. The real loop in-process, its workers answered by synthetic
samples (tests/run/fake_evaluator.py); commits in a real git repository."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from orchestrator.cli.report_text import format_text
from orchestrator.ledger.reporting import run_summary
from orchestrator.providers.replay import ReplayProvider
from orchestrator.run.finalists import chained_lower_bound, next_best
from protocol.bundle import Budget
from protocol.completion import CompletionReport
from protocol.outcome import ExitCode, StoppingReason
from protocol.results import Decision, DecisionStatus, ExperimentRecord, revalidation_id
from protocol.roles import Role
from tests.conftest import SYNTHETIC, synthetic_kernel, write_candidates
from tests.run.fake_evaluator import Request, resume_in_process, run_in_process, synthetic
from tests.vcs.conftest import GitRepo

pytestmark = pytest.mark.timeout(120)

FIRST = synthetic_kernel(60.0)  # r001-c000: faster than the baseline's 100 us
SECOND = synthetic_kernel(45.0)  # r001-c001: faster than FIRST; its revalidation will not hold
BUDGET = Budget(max_rounds=1, candidates_per_round=2, max_total_seconds=3600)


def slower_at_revalidation(revalidations: set[str], source: str = SECOND, *, wall_seconds: float = 0.5):
    """Synthetic samples, except that `source` runs 1.0098x faster than the baseline (not the 1.01x the gate asks)
    in the finalist runs of the revalidations named, which take `wall_seconds` each."""
    honest, slow = synthetic(), synthetic(wall_seconds=wall_seconds)

    def respond(request: Request, cases):
        if request.experiment_id in revalidations and request.role is Role.FINAL and request.source == source:
            return slow(dataclasses.replace(request, source=synthetic_kernel(100.0 / 1.0098)), cases)
        return honest(request, cases)

    return respond


def replay(tmp_path, sources=(FIRST, SECOND)) -> ReplayProvider:
    return ReplayProvider(write_candidates(tmp_path / "cands", list(sources)))


@pytest.fixture
def git_bundle(tmp_path, monkeypatch):
    """The synthetic bundle inside a real git repository (no machine-wide git configuration)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = GitRepo(tmp_path / "repo")
    for name in ("kernel.py", "harness.py", "cases.json", "target.json"):
        shutil.copy(SYNTHETIC / name, repo.root / name)
    repo.commit_all("add kernel")
    return repo


def test_the_next_best_promotion_is_revalidated_when_the_finalist_fails(tmp_path, git_bundle):
    run = run_in_process(git_bundle.root, tmp_path / "out", replay(tmp_path), slower_at_revalidation({"final"}),
                         budget=BUDGET, commit_winner=True)
    result = run.result
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "promoted", "r001-c001": "promoted",
                               "final": "rejected", "final-2": "revalidated"}
    assert result.exit_code == ExitCode.OK and result.winner_experiment_id == "r001-c000"
    assert (run.output_dir / "best_kernel.py").read_text() == FIRST
    # the rounds' reason stands (the run has a winner); the detail says what the revalidations did
    assert result.stopping_reason is StoppingReason.ROUND_BUDGET_EXHAUSTED
    assert result.stopping_detail.startswith("all 1 round(s) ran (2 candidate(s), 2 promoted)")
    assert "the finalist r001-c001 failed revalidation" in result.stopping_detail
    assert "the next-best r001-c000 was revalidated (final-2" in result.stopping_detail
    tried = [(a.experiment_id, a.revalidation_id, a.status) for a in result.report.finalists]
    assert tried == [("r001-c001", "final", "rejected"), ("r001-c000", "final-2", "revalidated")]
    assert "below the 1.0100x threshold" in result.report.finalists[0].reason
    assert result.final is not None and result.final.label == "final"
    assert result.report.aggregate_speedup == run.experiment("final-2").aggregate_speedup > 1.5
    # the live log, the journal, stdout's summary and the text report name the fallback
    log = (run.output_dir / "live.log").read_text()
    assert "final status=rejected" in log and "final-2 status=revalidated" in log
    assert "final status=next_best finalist=r001-c000 revalidation=final-2 after=r001-c001" in log
    journal = [json.loads(line) for line in (run.output_dir / "journal.jsonl").read_text().splitlines()]
    fallback = next(e for e in journal if e["event"] == "finalist_fallback")
    assert (fallback["failed"], fallback["next"], fallback["next_revalidation_id"]) == ("r001-c001", "r001-c000",
                                                                                       "final-2")
    summary = run_summary(result, list(run.evaluator.inputs.cases), 0.02)
    assert [a.revalidation_id for a in summary.finalists] == ["final", "final-2"]
    text = format_text(CompletionReport(
        finished=True, exit_code=result.exit_code, success=True, output_dir=str(run.output_dir), error=None,
        kernel=None, inputs=None, workload=[], device="cpu", backend="cpu", architecture=None, aggregate_speedup=None,
        worst_final_cv=None, max_cv=None, all_protected_correct=True, stopping_reason=result.stopping_reason,
        winner_experiment_id=result.winner_experiment_id, best_kernel_path=None, commit=None, commits=[],
        finalists=result.report.finalists, wall_seconds=None, sources=[]))
    assert "  finalist r001-c001 (final): rejected" in text and "  finalist r001-c000 (final-2): revalidated" in text
    # the checkout: both promotions committed, then one commit back to the revalidated winner's checkpoint
    assert git_bundle.read("kernel.py").decode() == FIRST and git_bundle.status() == []
    assert git_bundle.show("HEAD", "kernel.py").decode() == FIRST
    assert git_bundle.commit_count() == 4
    assert "rollback:r001-c000" in git_bundle.message()
    assert [(c.kind, c.status, c.experiment_id) for c in result.commits] == [
        ("promotion", "committed", "r001-c000"), ("promotion", "committed", "r001-c001"),
        ("rollback", "committed", "r001-c000")]
    assert "rolled back to r001-c000" in result.report.commit


def test_every_finalist_failing_rolls_back_to_the_baseline(tmp_path, git_bundle):
    run = run_in_process(git_bundle.root, tmp_path / "out", replay(tmp_path),
                         lambda request, cases: slower_at_revalidation(
                             {"final"})(request, cases) if request.source != FIRST else slower_at_revalidation(
                             {"final-2"}, FIRST)(request, cases),
                         budget=BUDGET, commit_winner=True)
    result = run.result
    assert result.exit_code == ExitCode.NO_WINNER and result.winner_experiment_id == "baseline"
    assert result.stopping_reason is StoppingReason.FINALIST_REVALIDATION_FAILED
    assert [(a.experiment_id, a.status) for a in result.report.finalists] == [("r001-c001", "rejected"),
                                                                             ("r001-c000", "rejected")]
    assert "the next-best r001-c000 failed too (final-2" in result.stopping_detail
    assert "no further finalist was tried: no earlier promotion is left" in result.stopping_detail
    assert git_bundle.read("kernel.py") == (SYNTHETIC / "kernel.py").read_bytes() and git_bundle.status() == []
    assert [(c.kind, c.experiment_id) for c in result.commits][-1] == ("rollback", None)


def test_no_next_best_when_a_revalidation_no_longer_fits(tmp_path):
    """The failed revalidation's finalist run took 4000 s: another does not fit in what is left of 3600 s."""
    run = run_in_process(SYNTHETIC, tmp_path / "out", replay(tmp_path),
                         slower_at_revalidation({"final"}, wall_seconds=4000.0), budget=BUDGET)
    result = run.result
    assert result.exit_code == ExitCode.NO_WINNER and "final-2" not in run.decisions()
    assert result.stopping_reason is StoppingReason.FINALIST_REVALIDATION_FAILED
    assert "no further finalist was tried: the next-best r001-c000 needs about" in result.stopping_detail
    assert [a.revalidation_id for a in result.report.finalists] == ["final"]
    assert any("final status=no_next_best after=r001-c001" in line for line in run.log_lines)


class Killed(Exception):
    """Stands for SIGKILL: the orchestrator dies where the evaluation was asked for."""


def test_a_run_killed_during_the_fallback_resumes_to_the_same_end(tmp_path, git_bundle):
    respond = slower_at_revalidation({"final"})

    def dies_in_the_fallback(request: Request, cases):
        if request.experiment_id == "final-2" and request.role is Role.FINAL:
            raise Killed
        return respond(request, cases)

    with pytest.raises(Killed):
        run_in_process(git_bundle.root, tmp_path / "out", replay(tmp_path), dies_in_the_fallback, budget=BUDGET,
                       commit_winner=True)
    # killed mid-fallback: the checkout holds the last checkpoint, as during any revalidation
    assert git_bundle.read("kernel.py").decode() == SECOND and git_bundle.status() == []
    resumed = resume_in_process(git_bundle.root, tmp_path / "out", replay(tmp_path), respond, budget=BUDGET,
                                commit_winner=True)
    result = resumed.result
    assert resumed.decisions() == {"baseline": "baseline", "r001-c000": "promoted", "r001-c001": "promoted",
                                   "final": "rejected", "final-2": "revalidated"}
    assert result.exit_code == ExitCode.OK and result.winner_experiment_id == "r001-c000"
    assert [(a.experiment_id, a.status) for a in result.report.finalists] == [("r001-c001", "rejected"),
                                                                             ("r001-c000", "revalidated")]
    # the recorded revalidation was taken, not measured again; only the fallback's runs ran
    assert {r.experiment_id for r in resumed.evaluator.requests} == {"final-2"}
    assert (tmp_path / "out" / "experiments" / "final-2.interrupted-1").is_dir()
    assert git_bundle.read("kernel.py").decode() == FIRST and git_bundle.status() == []
    assert [(c.kind, c.experiment_id) for c in result.commits] == [
        ("promotion", "r001-c000"), ("promotion", "r001-c001"), ("rollback", "r001-c000")]
    assert git_bundle.commit_count() == 4


def _promoted(experiment_id: str, parent: str, lower_bound: float | None, aggregate: float) -> ExperimentRecord:
    return ExperimentRecord(experiment_id=experiment_id, round_index=1, parent_id=parent,
                            aggregate_speedup=aggregate,
                            statistics={"lower_bound": lower_bound} if lower_bound is not None else {},
                            decision=Decision(status=DecisionStatus.PROMOTED, reason="promoted"))


def test_the_next_best_is_ordered_by_the_chained_lower_bound_over_the_baseline():
    baseline = ExperimentRecord(experiment_id="baseline", decision=Decision(status=DecisionStatus.BASELINE,
                                                                           reason="baseline"))
    one = _promoted("r001-c000", "baseline", 1.20, 1.30)
    two = _promoted("r002-c000", "r001-c000", 1.05, 1.10)
    three = _promoted("r003-c000", "r002-c000", None, 1.02)  # a record without its test: its point estimate
    experiments = [baseline, one, two, three]
    assert chained_lower_bound(two, experiments) == pytest.approx(1.20 * 1.05)
    assert chained_lower_bound(three, experiments) == pytest.approx(1.20 * 1.05 * 1.02)
    assert next_best(experiments, {"r003-c000"}).experiment_id == "r002-c000"
    assert next_best(experiments, {"r003-c000", "r002-c000"}).experiment_id == "r001-c000"
    assert next_best(experiments, {"r001-c000", "r002-c000", "r003-c000"}) is None
    assert [revalidation_id(n) for n in (1, 2, 3)] == ["final", "final-2", "final-3"]
