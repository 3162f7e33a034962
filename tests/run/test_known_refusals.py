"""No round spent on what is known: a proposal repeating a source the run already refused (a failed build,
compile ahead, a screening) or a configuration its infeasible store rules out never reaches a worker; the provider
is asked again, and one that proposes only such things ends the round. The real loop in-process
(tests/run/fake_evaluator.py), with the replay provider and one that repeats itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.compile_ahead.ahead import compile_target_for
from orchestrator.compile_ahead.feasibility import Feasibility, Verdict
from orchestrator.compile_ahead.signature import kernel_scope
from orchestrator.compile_ahead.store import InfeasibleStore
from orchestrator.providers.base import Proposal, ProposalContext
from orchestrator.providers.replay import ReplayProvider
from orchestrator.run.refusals import known_refusal, screening_refusals
from orchestrator.source_digest import normalized_digest
from protocol.bundle import Budget, load_target_file
from protocol.outcome import StoppingReason
from protocol.results import CandidateMetadata, Evaluation, EvaluationStatus, WorkerRecord
from tests.compile_ahead.variant_checks import ROOT, VARIANTS
from tests.conftest import SYNTHETIC, synthetic_kernel, write_candidates
from tests.run.fake_evaluator import Request, resume_in_process, run_in_process, synthetic

pytestmark = pytest.mark.timeout(120)

BROKEN = synthetic_kernel(30.0, prelude="# BUILD FAILS\n")
BROKEN_AGAIN = BROKEN.replace("# BUILD FAILS", "# BUILD FAILS, reworded comment only")
FASTER = synthetic_kernel(50.0)
H200 = load_target_file(ROOT / "examples" / "matmul" / "h200" / "target.json")


def builds_unless_marked():
    """Synthetic samples; a source marked `BUILD FAILS` fails its build in the worker."""
    honest = synthetic()

    def respond(request: Request, cases):
        if "BUILD FAILS" in request.source:
            return Evaluation(label=request.role.value, status=EvaluationStatus.BUILD_FAILED,
                              reason="build failed: kernel does not define scale(values)",
                              worker=WorkerRecord(device="cpu", wall_seconds=0.5))
        return honest(request, cases)

    return respond


def test_a_repeat_of_a_source_that_failed_to_build_is_skipped_and_the_provider_asked_again(tmp_path):
    provider = ReplayProvider(write_candidates(tmp_path / "cands", [BROKEN, BROKEN_AGAIN, FASTER]))
    run = run_in_process(SYNTHETIC, tmp_path / "out", provider, builds_unless_marked(),
                         budget=Budget(max_rounds=2, candidates_per_round=1, max_total_seconds=3600))
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "failed", "r002-c000": "promoted",
                               "final": "revalidated"}
    # the repeat was never given to a worker; round 2 measured the next proposal instead of a duplicate
    assert not any(r.source == BROKEN_AGAIN for r in run.evaluator.requests)
    (refused,) = run.experiment("r002-c000").refused_proposals
    assert refused.normalized_sha256 == normalized_digest(BROKEN_AGAIN) == normalized_digest(BROKEN)
    assert refused.reason.startswith("r001-c000: build failed")
    assert Path(refused.source_path).read_text() == BROKEN_AGAIN
    log = (run.output_dir / "live.log").read_text()
    assert "r002-c000 status=proposal_refused attempt=1/3" in log
    journal = [json.loads(line) for line in (run.output_dir / "journal.jsonl").read_text().splitlines()]
    assert [e["experiment_id"] for e in journal if e["event"] == "proposal_refused"] == ["r002-c000"]
    assert run.result.winner_experiment_id == "r002-c000"


class Repeating:
    """Proposes the same source every time (an LLM that does not read what it was told)."""

    name = "repeating"
    concurrent = False

    def __init__(self, source: str) -> None:
        self.source = source
        self.calls: list[str] = []

    async def propose(self, context: ProposalContext) -> Proposal:
        self.calls.append(context.experiment_id)
        return Proposal(source=self.source, metadata=CandidateMetadata(change="the same again"))

    async def aclose(self) -> None:
        pass


def test_a_provider_proposing_only_refused_sources_ends_the_round(tmp_path):
    provider = Repeating(BROKEN)
    run = run_in_process(SYNTHETIC, tmp_path / "out", provider, builds_unless_marked(),
                         budget=Budget(max_rounds=2, candidates_per_round=2, max_total_seconds=3600))
    # round 1: both slots were proposed before the first was measured (its repeat is a duplicate, no worker);
    # round 2: three refused in a row, the round ends without asking for its second slot
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "failed", "r001-c001": "duplicate",
                               "r002-c000": "duplicate"}
    assert provider.calls == ["r001-c000", "r001-c001", "r002-c000", "r002-c000", "r002-c000"]
    record = run.experiment("r002-c000")
    assert len(record.refused_proposals) == 3 and record.source_path == "" and record.proposals_made == 3
    assert record.decision.reason.startswith("no proposal: 3 proposal(s) in a row repeated what the run already")
    assert any("r002-c000 status=round_ended reason='the repeating provider proposed only what the run already "
               "refused (3 in a row)" in line for line in run.log_lines)
    assert [r.experiment_id for r in run.evaluator.requests if r.source == BROKEN] == ["r001-c000"]
    assert run.result.stopping_reason is StoppingReason.ROUND_BUDGET_EXHAUSTED


class Killed(Exception):
    """Stands for SIGKILL."""


def test_a_resumed_run_refuses_what_its_records_and_screenings_refused(tmp_path):
    """Killed in round 2: the resumed run rebuilds its refusals from the experiment records and screening.jsonl
    (a variant whose build failed in a screening), and the replay provider continues after the refused files."""
    screened_broken = synthetic_kernel(20.0, prelude="# screened: its build failed\n")
    sources = [BROKEN, BROKEN_AGAIN, FASTER, screened_broken, synthetic_kernel(40.0)]
    respond = builds_unless_marked()
    budget = Budget(max_rounds=3, candidates_per_round=1, max_total_seconds=3600)

    def dies_in_round_two(request: Request, cases):
        if request.experiment_id == "r002-c000" and request.tag == "1-incumbent":
            (tmp_path / "out" / "screening.jsonl").write_text(json.dumps({
                "screen_id": "s001", "variant": "v03", "label": "BLOCK 64", "status": "build_failed",
                "reason": "compile ahead: shared memory", "normalized_sha256": normalized_digest(screened_broken)})
                + "\n")
            raise Killed
        return respond(request, cases)

    with pytest.raises(Killed):
        run_in_process(SYNTHETIC, tmp_path / "out", ReplayProvider(write_candidates(tmp_path / "cands", sources)),
                       dies_in_round_two, budget=budget)
    assert screening_refusals(tmp_path / "out") == {
        normalized_digest(screened_broken): "screening s001 v03 (BLOCK 64): build_failed: compile ahead: shared memory"}
    resumed = resume_in_process(SYNTHETIC, tmp_path / "out", ReplayProvider(tmp_path / "cands"), respond,
                                budget=budget)
    assert resumed.decisions() == {"baseline": "baseline", "r001-c000": "failed", "r002-c000": "promoted",
                                   "r003-c000": "promoted", "final": "revalidated"}
    # r002-c000 ran again with its refused repeat; r003-c000 refused the screened variant and took the next file
    assert [len(resumed.experiment(i).refused_proposals) for i in ("r002-c000", "r003-c000")] == [1, 1]
    assert resumed.experiment("r003-c000").refused_proposals[0].reason.startswith("screening s001 v03")
    assert not any(r.source == screened_broken for r in resumed.evaluator.requests)
    assert resumed.result.winner_experiment_id == "r003-c000"


def test_a_configuration_the_infeasible_store_rules_out_is_refused(tmp_path):
    """The tuner states its configuration: one at least as large as a remembered infeasible one, in the same
    direction, is refused whatever its source looks like; another one, or a CPU target, is not."""
    source = VARIANTS["baseline"]
    store = InfeasibleStore(tmp_path / "infeasible_configs.jsonl")
    infeasible = {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4}
    store.record(kernel_scope(source, "matmul_kernel", compile_target_for(H200)), infeasible,
                 Feasibility(verdict=Verdict.INFEASIBLE, resource="shared memory", reason="294912 B > 232448 B"))

    def proposal(**configuration: int) -> Proposal:
        return Proposal(source=source, metadata=CandidateMetadata(), configuration=configuration)

    grown = proposal(BLOCK_M=256, BLOCK_N=256, BLOCK_K=64, num_warps=4, num_stages=4)
    why = known_refusal({}, store, grown, H200)
    assert why is not None and "ruled out by the infeasible" in why and "(shared memory)" in why
    assert known_refusal({}, store, proposal(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4),
                         H200) is None
    assert known_refusal({}, store, grown, load_target_file(ROOT / "examples" / "matmul" / "target.json")) is None
    assert known_refusal({}, None, grown, H200) is None
    assert known_refusal({normalized_digest(source): "r001-c000: build failed"}, None,
                         Proposal(source=source + "\n# a comment\n", metadata=CandidateMetadata()),
                         H200) == "r001-c000: build failed"
