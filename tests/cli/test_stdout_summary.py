"""optimize's stdout: one compact JSON document (the decision, each case's figures, one line per experiment,
the paths of the full record), and a candidate that slows a protected case turned down by name, through the
real CLI and real workers on a three-case synthetic bundle (tests/cli/per_case_bundle)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli.report import load_completion
from protocol.summary import RunSummary
from tests.conftest import run_cli, write_candidates

pytestmark = pytest.mark.timeout(600)

BUNDLE = Path(__file__).resolve().parent / "per_case_bundle"
BASELINE = {"rows4096": 100.0, "rows8192": 200.0, "ragged_3001x777": 40.0}


def kernel(**latency: float) -> str:
    return (f'"""Synthetic candidate."""\n\nLATENCY_US = {json.dumps({**BASELINE, **latency})}\n\n\n'
            "def scale(values):\n    return [v * 2.0 for v in values]\n")


# What a tile size tuned for the large shapes does to the ragged one: 1.25x, 1.25x and 0.899x, 1.12x overall.
SLOWS_RAGGED = kernel(rows4096=80.0, rows8192=160.0, ragged_3001x777=44.5)
FASTER_EVERYWHERE = kernel(rows4096=85.0, rows8192=170.0, ragged_3001x777=39.0)
# then as many candidates as the default budget asks for (5 rounds of 2), each no better than that one
OTHERS = [kernel(rows4096=85.0, rows8192=170.0 + 0.5 * i, ragged_3001x777=39.0) for i in range(8)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("summary")
    candidates = write_candidates(tmp / "candidates", [SLOWS_RAGGED, FASTER_EVERYWHERE, *OTHERS])
    out = tmp / "out"
    done = run_cli("--kernel", BUNDLE / "kernel.py", "--harness", BUNDLE / "harness.py", "--cases",
                   BUNDLE / "cases.json", "--target", BUNDLE / "target.json", "--output-dir", out,
                   "--no-commit-winner", "--provider", "replay", "--replay-dir", candidates, timeout=580)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_stdout_is_a_compact_summary_that_fits_a_screen(run):
    lines = run.stdout.splitlines()
    summary = RunSummary.model_validate_json(run.stdout)
    assert len(summary.experiments) == 11  # 10 candidates at the default 5 rounds x 2, and the final
    assert len(lines) <= 150, len(lines)
    assert "samples_us" not in run.stdout
    result_path = Path(summary.result_json)
    result = json.loads(result_path.read_text())
    assert result_path.parent == Path(summary.output_dir) and len(result_path.read_text().splitlines()) > 1000
    assert (summary.success, summary.exit_code, summary.winner_experiment_id) == (True, 0, "r001-c001")
    assert summary.aggregate_speedup == result["report"]["aggregate_speedup"]
    assert [case.model_dump(include={"case_id", "baseline_median_us", "final_median_us", "speedup"})
            for case in summary.cases] == [
        {key: case[key] for key in ("case_id", "baseline_median_us", "final_median_us", "speedup")}
        for case in result["report"]["workload"]]
    assert [line.experiment_id for line in summary.experiments] == \
        [e["experiment_id"] for e in result["experiments"] if e["experiment_id"] != "baseline"]
    assert Path(summary.live_log).is_file() and Path(summary.best_kernel_path).read_text() == FASTER_EVERYWHERE


def test_the_candidate_that_slowed_a_protected_case_is_turned_down_by_name(run):
    summary = RunSummary.model_validate_json(run.stdout)
    slowed = next(line for line in summary.experiments if line.experiment_id == "r001-c000")
    assert slowed.decision == "rejected" and slowed.aggregate_speedup > 1.1
    assert slowed.slower_cases == ["ragged_3001x777"]
    # triage (the default): its first run, beside the incumbent's last one, already shows the ragged case slower
    # than 0.98x by more than the triage margin, so no incumbent is measured for it
    record = run.experiment("r001-c000")
    assert [e["label"] for e in record["evaluations"]] == ["candidate"]
    ragged = next(row for row in record["comparisons"] if row["case_id"] == "ragged_3001x777")
    bar = record["statistics"]["triage"]["case_bars"]["ragged_3001x777"]
    named = f"ragged_3001x777 {ragged['speedup']:.3f}x < {bar:.3f}x"
    assert 0.88 < ragged["speedup"] < 0.92 and bar < 0.98
    assert slowed.reason.startswith("triaged on its first run against the incumbent's last run in this run: "
                                    f"protected case slower: {named}")
    assert record["decision"]["gates"]["case_regression"] is False
    assert record["decision"]["reason"] == slowed.reason
    log_line = next(line for line in run.stderr.splitlines() if "r001-c000 status=rejected" in line)
    assert named in log_line
    assert all(not line.slower_cases for line in summary.experiments if line.experiment_id != "r001-c000")
    assert run.result["report"]["aggregate_speedup"] > 1.0


def test_the_report_reads_the_saved_stdout(run, tmp_path):
    saved = tmp_path / "optimize.json"
    saved.write_text(run.stdout)
    report = load_completion(saved)
    assert report.finished and report.winner_experiment_id == "r001-c001"
    assert report.sources[0] == json.loads(run.stdout)["result_json"]
