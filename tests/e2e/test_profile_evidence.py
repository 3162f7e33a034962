"""Profile evidence must exist and agree with the benchmark: a candidate whose profile step fails, or whose
profiled kernel time is far from its benchmarked time, is not promoted; an honest one still is; a run whose
untouched kernel no profiler measured says so once and requires nothing (tests/e2e/profiled: a synthetic
bundle whose harness reports the kernel time the kernel file declares)."""

from __future__ import annotations

import re

import pytest

from orchestrator.decision.profile_rules import evidence_problem, tools_with_evidence
from tests.conftest import PROJECT_ROOT, run_cli, synthetic_kernel, write_candidates

PROFILED = PROJECT_ROOT / "tests" / "e2e" / "profiled"


def _proton(us):
    return {"proton": {"available": True, "total_kernel_us": us, "main_kernel_us": us, "non_main_kernel_us": 0.0}}


def test_evidence_is_required_from_the_tools_that_measured_the_untouched_kernel():
    assert tools_with_evidence({"a": _proton(10.0), "b": None}) == ["proton"]
    assert tools_with_evidence({"a": {"proton": {"available": False, "total_kernel_us": None}}}) == []
    ncu = {"ncu": {"available": True, "summary": {"duration_us": 9.0}}}
    assert tools_with_evidence({"a": {**_proton(10.0), **ncu}}) == ["proton", "ncu"]


def test_missing_or_disagreeing_evidence_is_named_with_its_figures_and_agreeing_evidence_passes():
    assert evidence_problem("n16M", _proton(50.0), 55.1, ["proton"]) is None
    assert evidence_problem("n16M", _proton(6.7), 55.1, ["proton"]).startswith(
        "n16M: Proton 6.7 us vs benchmark 55.1 us")
    assert evidence_problem("n16M", _proton(400.0), 55.1, ["proton"]).startswith(
        "n16M: Proton 400.0 us vs benchmark 55.1 us")
    assert evidence_problem("n16M", {"error": "RuntimeError: crashed"}, 55.1, ["proton"]) == \
        "profile missing for n16M: Proton (the profile step failed: RuntimeError: crashed)"
    assert evidence_problem("n16M", None, 55.1, ["proton"]).startswith("profile missing for n16M: Proton")
    assert evidence_problem("n16M", None, 55.1, []) is None  # a run without profilers requires nothing
    # NCU times the main kernel's launch only: with three launches per call it may be well under the benchmark
    ncu = {"ncu": {"available": True, "summary": {"duration_us": 10.0}}}
    assert evidence_problem("c", ncu, 40.0, ["ncu"], launches=3) is None
    assert evidence_problem("c", ncu, 40.0, ["ncu"], launches=1) is not None
    # a tiny kernel: a few microseconds of launch gaps are allowed for
    assert evidence_problem("tiny", _proton(1.5), 3.9, ["proton"]) is None


@pytest.mark.slow
def test_a_candidate_without_profile_or_with_a_profile_that_disagrees_is_not_promoted_and_an_honest_one_is(tmp_path):
    candidates = write_candidates(tmp_path / "candidates", [
        synthetic_kernel(50.0, prelude="PROFILE_FAILS = True"),
        synthetic_kernel(50.0, prelude="PROFILED_US = 6.0"),
        synthetic_kernel(50.0),
    ])
    out = tmp_path / "out"
    run = run_cli("--kernel", PROFILED / "kernel.py", "--harness", PROFILED / "harness.py",
                  "--cases", PROFILED / "cases.json", "--target", PROFILED / "target.json", "--output-dir", out,
                  "--no-commit-winner", "--max-candidate-seconds", "30", "--max-total-seconds", "240",
                  "--provider", "replay", "--replay-dir", candidates, "--max-rounds", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "profile_evidence required=proton" in run.stderr
    decisions = {e["experiment_id"]: e["decision"] for e in run.result["experiments"]}
    assert decisions["r001-c000"]["status"] == "rejected"
    assert "profile evidence: profile missing for small: Proton (the profile step failed: RuntimeError: the " \
           "profiler crashed on this kernel)" in decisions["r001-c000"]["reason"]
    assert decisions["r001-c001"]["status"] == "rejected"
    assert re.search(r"profile evidence: small: Proton 6\.0 us vs benchmark (49|50)\.\d us",
                     decisions["r001-c001"]["reason"]), decisions["r001-c001"]["reason"]
    assert decisions["r002-c000"]["status"] == "promoted"
    assert decisions["final"]["status"] == "revalidated"
