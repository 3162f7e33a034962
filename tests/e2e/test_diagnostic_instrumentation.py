"""Diagnostic-only instrumentation is kept apart: its own worker, never benchmarked, never in a decision."""

from __future__ import annotations

import json

import pytest

from orchestrator.decision.gates import decide
from protocol.bundle import Budget, Case
from protocol.profile import ProfileRequest
from protocol.results import Evaluation, EvaluationStatus
from tests.conftest import run_cli, synthetic_args, synthetic_kernel, write_candidates

pytestmark = pytest.mark.timeout(180)


def test_instrumentation_requests_must_be_diagnostic_only():
    with pytest.raises(ValueError, match="diagnostic_only"):
        ProfileRequest(tools=["proton_intra_kernel"], experiment_id="x", artifacts_dir="/tmp/x")
    with pytest.raises(ValueError, match="warp"):
        ProfileRequest(tools=["proton_intra_kernel"], experiment_id="x", artifacts_dir="/tmp/x",
                       diagnostic_only=True, granularity="warp_group")


def test_a_diagnostic_evaluation_never_enters_a_decision():
    diagnostic = Evaluation(label="diagnostic", status=EvaluationStatus.OK)
    incumbent = Evaluation(label="incumbent", status=EvaluationStatus.OK)
    with pytest.raises(ValueError, match="never take part"):
        decide([Case(case_id="a")], diagnostic, [incumbent], Budget())
    with pytest.raises(ValueError, match="never take part"):
        decide([Case(case_id="a")], incumbent, [diagnostic], Budget())


def test_cli_collects_diagnostic_traces_apart_from_the_decision(tmp_path, out_dir):
    replay = write_candidates(tmp_path / "cands", [synthetic_kernel(50.0)])
    run = run_cli(*synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay,
                                  "--diagnostic-instrumentation"))
    assert run.returncode == 0, run.stderr
    for experiment_id in ("baseline", "final"):
        diagnostic = json.loads((out_dir / "experiments" / experiment_id / "diagnostic_profile.json").read_text())
        assert diagnostic["diagnostic_only"] is True
        assert f"{experiment_id} diagnostic_instrumentation=" in run.stderr
    labels = [e["label"] for e in run.experiment("final")["evaluations"]]
    assert "diagnostic" not in labels  # the decision record holds only measured evaluations
    assert run.result["winner_experiment_id"] == "r001-c000"
