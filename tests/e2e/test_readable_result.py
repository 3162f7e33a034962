"""What a person reads after a run: why it stopped, in result.json, and a live log without repeated lists.

Real CLI and worker subprocesses on the synthetic bundle; one copy of its harness gains a `profile()` through
the harness kit, which on a machine without a GPU reports every profiler unavailable, as the examples do on CPU.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import SYNTHETIC, run_cli, synthetic_args, synthetic_kernel, write_candidates

pytestmark = pytest.mark.timeout(300)

FASTER = synthetic_kernel(50.0)
SLOWER = synthetic_kernel(150.0)

PROFILING_HARNESS = '''

from sandbox_worker.harness_kit.profile_kit import profile_with_kit


def profile(module, case, request=None):
    values = _inputs(case, 3)
    return profile_with_kit(lambda: module.scale(values), request=request or {}, case=case, kernel_name="scale",
                            main_scope="scale", ncu_replay=None)
'''


def profiling_bundle(directory: Path) -> Path:
    """The synthetic bundle whose harness also answers profile requests."""
    directory.mkdir(parents=True)
    for name in ("cases.json", "target.json", "kernel.py"):
        (directory / name).write_text((SYNTHETIC / name).read_text())
    (directory / "harness.py").write_text((SYNTHETIC / "harness.py").read_text() + PROFILING_HARNESS)
    return directory


def test_an_exhausted_tuner_says_in_result_json_what_it_looked_for_and_what_to_edit(out_dir):
    run = run_cli(*synthetic_args(out_dir, "--provider", "tune"))
    assert run.returncode == 2, run.stderr
    result = run.result
    assert result["stopping_reason"] == "provider_exhausted"
    detail = result["stopping_detail"]
    assert detail.startswith("tune found no tunable knob in the incumbent: it looked for module constants, launch "
                             "arguments, wrapper assignments, triton.autotune, triton.heuristics, launch grids; "
                             "found none"), detail
    suggestion = ("launch the kernel from this file as kernel[grid](..., BLOCK_SIZE=BLOCK_SIZE, num_warps=4) with a "
                  "module-level BLOCK_SIZE = <int> constant")
    assert f"to expose one, {suggestion}" in detail
    assert result["report"]["stopping_detail"] == detail
    written = json.loads((out_dir / "result.json").read_text())
    assert written["stopping_detail"] == detail
    # the whole explanation, not only the sentence: each place it looked, what it found there, the edit
    explanation = written["provider_explanation"]["no_knob_found"]
    assert [c["category"] for c in explanation["categories"]] == [
        "module constants", "launch arguments", "wrapper assignments", "triton.autotune", "triton.heuristics",
        "launch grids"]
    assert all(c["found"] == [] and c["looked_for"] for c in explanation["categories"])
    assert explanation["suggestions"] == [suggestion]


def test_round_budget_detail_and_a_profile_list_printed_once(tmp_path, out_dir):
    bundle = profiling_bundle(tmp_path / "bundle")
    replay = write_candidates(tmp_path / "cands", [FASTER, SLOWER, FASTER])
    args = synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay, "--max-rounds", "1",
                          kernel=bundle / "kernel.py")
    args[args.index("--harness") + 1] = bundle / "harness.py"
    run = run_cli(*args)
    assert run.returncode == 0, run.stderr
    result = run.result
    assert result["stopping_reason"] == "round_budget_exhausted"
    assert result["stopping_detail"] == ("all 1 round(s) ran (2 candidate(s), 1 promoted); raise --max-rounds to "
                                         "try more candidates")

    log = (out_dir / "live.log").read_text()
    # the runs that bring a profile (the baseline's, the finalist's) say per case that no profiler was there;
    # with none, the run requires no evidence and profiles no candidate, so a candidate's lines say nothing of it
    case_tokens = re.findall(r"case=[^\s,]+,\S+", log)  # the tokens of evaluation and decision lines
    profiled = [token for token in case_tokens if ",profile=" in token]
    assert profiled and all(token.endswith(",profile=unavailable") for token in profiled), profiled
    candidate_lines = [line for line in log.splitlines() if " r001-c000 candidate evaluation=" in line]
    assert candidate_lines and all("profile=" not in line for line in candidate_lines)
    assert "profile_evidence required=none reason='no profiler measured the untouched kernel on this machine'" in log
    assert "proton=unavailable," not in log and ",native_profiler=unavailable" not in log
    assert log.count("profiles_unavailable=") == 1  # once per run, at the end of the baseline's line
    baseline_line = next(line for line in log.splitlines() if " baseline evaluation=" in line)
    summary = baseline_line.split(" profiles_unavailable=", 1)[1]
    assert summary.startswith(("'proton on 2/2 case(s), native_profiler on 2/2 case(s): ",
                               '"proton on 2/2 case(s), native_profiler on 2/2 case(s): ')), summary
    # every reason the summary names is each case's own diagnostic in result.json
    for case in result["baseline"]["cases"]:
        for diagnostic in case["profile"]["diagnostics"]:
            assert diagnostic[:60] in summary
        assert case["profile"]["proton"]["available"] is False
    promoted = run.experiment("r001-c000")["evaluations"]
    # triage: the candidate first, then the incumbent; the baseline's run before it is the first A
    assert [e["label"] for e in promoted] == ["candidate", "incumbent"]
    assert all(case["profile"] is None for e in promoted for case in e["cases"])


def test_failed_revalidation_names_the_gate(tmp_path, out_dir):
    marker = tmp_path / "already-measured"
    flaky = synthetic_kernel(
        "LATENCY", prelude=(f"import os\nMARKER = {str(marker)!r}\nLATENCY = 300.0 if os.path.exists(MARKER) else 40.0\n"
                            "if not os.path.exists(MARKER):\n    open(MARKER, 'w').close()\n"))
    replay = write_candidates(tmp_path / "cands", [flaky])
    # A/B/A: with triage's B/A/B the gate itself would time the flaky candidate twice and reject it
    run = run_cli(*synthetic_args(out_dir, "--provider", "replay", "--replay-dir", replay, "--isolation", "off",
                                  "--no-triage"))
    assert run.returncode == 2, run.stderr
    result = run.result
    assert result["stopping_reason"] == "finalist_revalidation_failed"
    final = run.experiment("final")["decision"]
    order = ("correct", "speedup", "cv", "noise", "profile")  # the order orchestrator/decision/gates.py checks
    failed = sorted((gate for gate, passed in final["gates"].items() if not passed), key=order.index)
    assert failed[0] == "speedup" and final["reason"].startswith("speedup"), final
    assert result["stopping_detail"].startswith(
        f"the finalist r001-c000 failed revalidation next to fresh baseline runs at the {', '.join(failed)} gate"), \
        result["stopping_detail"]
    assert (f"({final['reason']}); no further finalist was tried: no earlier promotion is left to revalidate, "
            "so the baseline stays; its earlier gain did not reproduce") in result["stopping_detail"]
