"""The pure shaping of records into report rows, on hand-built records (pydantic models, no files)."""

from __future__ import annotations

import pytest

from orchestrator.report_html.ceilings import ceilings_for
from orchestrator.report_html.data import (
    batch_rows,
    candidate_speedups,
    case_latencies,
    knob_moves,
    profile_deltas,
    promotion_threshold,
    search_path,
    work_figures,
)
from orchestrator.report_html.markup import Safe, table
from protocol.batch import BatchSummary, JobStatus, JobSummary
from protocol.completion import CaseOutcome
from protocol.results import (
    CandidateMetadata,
    CaseComparison,
    CaseMeasurement,
    Decision,
    DecisionStatus,
    Evaluation,
    EvaluationStatus,
    ExperimentRecord,
)


def _record(
    experiment_id: str, status: DecisionStatus, speedups: dict[str, float], **extra
) -> ExperimentRecord:
    comparisons = [
        CaseComparison(
            case_id=case,
            incumbent_median_us=100.0,
            candidate_median_us=100.0 / speedup,
            speedup=speedup,
            candidate_cv=0.01,
            incumbent_cv=0.01,
            correct=True,
        )
        for case, speedup in speedups.items()
    ]
    return ExperimentRecord(
        experiment_id=experiment_id,
        comparisons=comparisons,
        decision=Decision(status=status, reason=f"{experiment_id} because"),
        **extra,
    )


BASELINE = _record("baseline", DecisionStatus.BASELINE, {})
FASTER = _record(
    "r001-c000",
    DecisionStatus.PROMOTED,
    {"small": 1.5, "large": 1.2},
    metadata=CandidateMetadata(
        hypothesis="more work per program",
        change="BLOCK 64 -> 128 (constant at line 3); nothing else changes",
    ),
    statistics={
        "noise_estimate": 0.004,
        "lower_bound": 1.3,
        "min_speedup": 1.02,
        "per_case": {"small": {"lower": 1.45, "upper": 1.55}},
    },
)
FAILED = ExperimentRecord(
    experiment_id="r001-c001", decision=Decision(status=DecisionStatus.FAILED, reason="build")
)


def test_candidate_speedups_skip_the_baseline_and_keep_noise_and_intervals():
    rows = candidate_speedups([BASELINE, FASTER, FAILED])
    assert [row.experiment_id for row in rows] == ["r001-c000", "r001-c001"]
    faster, failed = rows
    assert (faster.status, faster.noise, faster.lower_bound) == ("promoted", 0.004, 1.3)
    small, large = faster.cases
    assert (small.case_id, small.speedup, small.lower, small.upper) == ("small", 1.5, 1.45, 1.55)
    assert (large.lower, large.upper) == (None, None)  # no interval recorded: none invented
    assert failed.cases == [] and failed.noise is None and failed.status == "failed"


def test_threshold_comes_from_the_budget_then_from_the_statistics():
    assert promotion_threshold({"min_speedup": 1.05}, [FASTER]) == 1.05
    assert promotion_threshold({}, [BASELINE, FASTER]) == 1.02
    assert promotion_threshold({}, [BASELINE]) is None


@pytest.mark.parametrize(
    ("change", "moves"),
    [
        ("BLOCK_M 32 -> 64 (constant at line 17); nothing else changes", ["BLOCK_M 32 -> 64"]),
        (
            "BLOCK_M 64 -> 128 and NUM_WARPS 2 -> 4 (lines 17 and 21); nothing else changes",
            ["BLOCK_M 64 -> 128", "NUM_WARPS 2 -> 4"],
        ),
        ("halve latency", []),
        ("", []),
    ],
)
def test_knob_moves_read_the_tuners_change_line(change, moves):
    assert knob_moves(change) == moves


def test_search_path_marks_promotions_and_carries_metadata():
    steps = search_path([BASELINE, FASTER, FAILED])
    assert [(step.experiment_id, step.status, step.promoted) for step in steps] == [
        ("baseline", "baseline", False),
        ("r001-c000", "promoted", True),
        ("r001-c001", "failed", False),
    ]
    assert steps[1].knob_moves == ["BLOCK 64 -> 128"] and steps[1].hypothesis == "more work per program"
    assert steps[2].reason == "build"


def _case(case_id: str, baseline_us: float, final_us: float) -> CaseOutcome:
    return CaseOutcome(
        case_id=case_id,
        parameters={"n": 1024, "dtype": "fp32"},
        weight=1.0,
        protected=True,
        baseline_median_us=baseline_us,
        final_median_us=final_us,
        speedup=baseline_us / final_us,
        baseline_cv=0.01,
        final_cv=0.01,
        correct=True,
    )


def test_rates_and_ceiling_fractions_on_an_h200():
    evaluation = Evaluation(
        label="baseline",
        status=EvaluationStatus.OK,
        cases=[
            CaseMeasurement(
                case_id="big", protected=True, weight=1.0, metrics={"bytes": 4.3e6, "flops": 2e6}
            ),
            CaseMeasurement(case_id="tiny", protected=True, weight=1.0, metrics={"wrong": 0}),
        ],
    )
    work = work_figures([None, evaluation])
    assert work == {"big": {"bytes": 4.3e6, "flops": 2e6}}
    big, tiny = case_latencies(
        [_case("big", 2.0, 1.0), _case("tiny", 5.0, 4.0)], work, ceilings_for("NVIDIA H200")
    )
    assert big.final_bytes_per_s == pytest.approx(4.3e12) and big.baseline_bytes_per_s == pytest.approx(
        2.15e12
    )
    assert big.final_bandwidth_fraction == pytest.approx(1.0)  # 4.3 TB/s, the measured copy ceiling
    assert big.final_flop_per_s == pytest.approx(2e12) and big.final_flop_fraction is None  # none measured
    assert big.parameters == "n=1024 dtype=fp32"
    assert (tiny.bytes, tiny.final_bytes_per_s, tiny.final_bandwidth_fraction) == (None, None, None)


def test_other_devices_get_rates_without_a_ceiling():
    assert (
        ceilings_for("NVIDIA A100-SXM4-80GB") is None
        and ceilings_for(None) is None
        and ceilings_for("cpu") is None
    )
    assert ceilings_for("nvidia h200 nvl") is not None
    (row,) = case_latencies([_case("big", 2.0, 1.0)], {"big": {"bytes": 1e6}}, ceilings_for("cpu"))
    assert row.final_bytes_per_s == pytest.approx(1e12) and row.final_bandwidth_fraction is None


def test_profile_deltas_keep_kernel_times_both_profiles_have():
    baseline = {
        "a": {"proton": {"main_kernel_us": 10.0, "wrapper_us": 3.0}, "ncu": {"summary": {"duration_us": 0}}},
        "b": {"proton": {"available": False, "main_kernel_us": None}},
        "only_before": {"proton": {}},
    }
    best = {
        "a": {"proton": {"main_kernel_us": 8.0, "wrapper_us": 1.0}, "ncu": {"summary": {"duration_us": 2.0}}},
        "b": {"proton": {"main_kernel_us": 5.0}},
    }
    rows = profile_deltas(baseline, best)
    assert [(row.case_id, row.metric) for row in rows] == [
        ("a", "ncu.duration_us"),
        ("a", "proton.main_kernel_us"),
    ]
    ncu, proton = rows
    assert (ncu.delta, ncu.relative) == (2.0, None)  # a zero baseline has no relative change
    assert (proton.baseline, proton.final, proton.delta, proton.relative) == (10.0, 8.0, -2.0, -0.2)
    assert profile_deltas(None, best) == []


def test_batch_rows_follow_the_summary_and_its_links():
    summary = BatchSummary(
        manifest="m.json",
        output_dir="/b",
        started="t",
        jobs=[
            JobSummary(
                job_id="one",
                kernel="k1.py",
                status=JobStatus.IMPROVED,
                exit_code=0,
                speedup=1.3,
                output_dir="/b/one",
                gpu="0",
                wall_seconds=12.0,
            ),
            JobSummary(
                job_id="two",
                kernel="k2.py",
                status=JobStatus.FAILED,
                exit_code=1,
                output_dir="/b/two",
                error="bad bundle",
            ),
        ],
    )
    one, two = batch_rows(summary, {"one": "one/report.html"})
    assert (one.job_id, one.status, one.speedup, one.report_link, one.gpu) == (
        "one",
        "improved",
        1.3,
        "one/report.html",
        "0",
    )
    assert (two.status, two.report_link, two.error, two.speedup) == ("failed", None, "bad bundle", None)


def test_tables_escape_text_and_pass_built_markup():
    built = table(["<h>"], [["<script>x</script>"], [Safe('<a href="r.html">r</a>')]])
    assert "&lt;script&gt;x&lt;/script&gt;" in built and "<script>" not in built
    assert "<th>&lt;h&gt;</th>" in built and '<a href="r.html">r</a>' in built
