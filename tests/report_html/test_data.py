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
    progress,
    promotion_threshold,
    search_path,
    work_figures,
)
from orchestrator.report_html.markup import Safe, table
from protocol.batch import BatchSummary, JobStatus, JobSummary
from protocol.completion import CaseOutcome
from protocol.devices import peaks_for
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


def test_rates_and_percent_of_the_datasheet_peaks_on_an_h200():
    evaluation = Evaluation(
        label="baseline",
        status=EvaluationStatus.OK,
        cases=[
            CaseMeasurement(
                case_id="big", protected=True, weight=1.0,
                metrics={"benchmark.bytes": 4.8e6, "benchmark.flops": 2e6, "benchmark.flop_dtype": "float16"},
            ),
            CaseMeasurement(case_id="tiny", protected=True, weight=1.0, metrics={"wrong": 0}),
        ],
    )
    work = work_figures([None, evaluation])
    assert work == {"big": {"bytes": 4.8e6, "flops": 2e6, "flop_dtype": "float16"}}
    ceilings = ceilings_for("NVIDIA H200", [evaluation])
    h200 = peaks_for("NVIDIA H200")
    assert ceilings.peaks == h200 and ceilings.copy_bytes_per_s is None  # no copy ceiling measured here
    big, tiny = case_latencies([_case("big", 2.0, 1.0), _case("tiny", 5.0, 4.0)], work, ceilings)
    assert big.final_bytes_per_s == pytest.approx(4.8e12) and big.baseline_bytes_per_s == pytest.approx(2.4e12)
    assert big.final_memory_peak_fraction == pytest.approx(4.8e12 / h200.memory_bytes_per_s)
    assert big.final_copy_fraction is None
    assert big.final_flop_per_s == pytest.approx(2e12)
    assert big.final_flop_peak_fraction == pytest.approx(2e12 / h200.flop_per_s["float16"])
    assert big.parameters == "n=1024 dtype=fp32"
    assert (tiny.bytes, tiny.final_bytes_per_s, tiny.final_memory_peak_fraction) == (None, None, None)


def test_a_copy_ceiling_measured_in_the_run_is_the_nearer_bar():
    measured = Evaluation(label="baseline", status=EvaluationStatus.OK, cases=[
        CaseMeasurement(case_id="big", protected=True, weight=1.0,
                        metrics={"benchmark.bytes": 4e6, "benchmark.device.copy_bytes_per_s": 4.0e12}),
        CaseMeasurement(case_id="other", protected=True, weight=1.0,
                        metrics={"benchmark.device.copy_bytes_per_s": 4.2e12})])
    ceilings = ceilings_for("NVIDIA H200", [measured, None])
    assert ceilings.copy_bytes_per_s == 4.2e12  # the highest any case measured
    (row,) = case_latencies([_case("big", 2.0, 1.0)], work_figures([measured]), ceilings)
    assert row.final_copy_fraction == pytest.approx(4e12 / 4.2e12)
    assert ceilings_for("cpu", [measured]).peaks is None  # no datasheet entry, the measurement still counts


def test_other_devices_get_rates_without_a_ceiling():
    assert ceilings_for("cpu") is None and ceilings_for(None) is None and ceilings_for("Some Future GPU") is None
    assert ceilings_for("nvidia h200 nvl").peaks.name == "H200 NVL"
    assert ceilings_for("NVIDIA A100-SXM4-80GB").peaks.name == "A100 80GB SXM"
    (row,) = case_latencies([_case("big", 2.0, 1.0)], {"big": {"bytes": 1e6}}, ceilings_for("cpu"))
    assert row.final_bytes_per_s == pytest.approx(1e12) and row.final_memory_peak_fraction is None


def test_a_protected_case_slower_beyond_its_noise_is_marked():
    slowed = _record("r002-c000", DecisionStatus.REJECTED, {"small": 1.3, "large": 0.89},
                     statistics={"per_case": {"small": {"lower": 1.28, "upper": 1.32},
                                              "large": {"lower": 0.88, "upper": 0.905}}})
    within = _record("r003-c000", DecisionStatus.PROMOTED, {"small": 1.3, "large": 0.97},
                     statistics={"per_case": {"large": {"lower": 0.95, "upper": 0.99}}})
    rows = candidate_speedups([slowed, within], protected=["small", "large"], allowance=0.02)
    assert [(c.case_id, c.slower) for row in rows for c in row.cases] == [
        ("small", False), ("large", True), ("small", False), ("large", False)]
    assert not candidate_speedups([slowed], protected=["small"])[0].cases[1].slower  # unprotected may slow
    assert candidate_speedups([slowed], allowance=0.15)[0].cases[1].slower is False
    latency = case_latencies([_case("large", 1.0, 1.12)], {}, None)[0]
    assert latency.slower and not case_latencies([_case("large", 1.0, 1.01)], {}, None)[0].slower


def test_progress_multiplies_promotions_and_takes_the_final_as_measured():
    promoted = _record("r001-c000", DecisionStatus.PROMOTED, {"a": 1.2}, wall_seconds=10.0)
    promoted.aggregate_speedup = 1.2
    rejected = _record("r002-c000", DecisionStatus.REJECTED, {"a": 0.9}, wall_seconds=5.0)
    rejected.aggregate_speedup = 0.9
    rejected.decision.gates["case_regression"] = False
    final = _record("final", DecisionStatus.REVALIDATED, {"a": 1.18}, wall_seconds=4.0)
    final.aggregate_speedup = 1.18
    points = progress([BASELINE, promoted, rejected, final], {"r001-c000": 12.0, "final": 30.0})
    assert [(p.experiment_id, p.seconds, p.best_so_far, p.slower_case) for p in points] == [
        ("r001-c000", 12.0, 1.2, False), ("r002-c000", 15.0, 1.2, True), ("final", 30.0, 1.18, False)]
    assert points[1].over_baseline == pytest.approx(1.08)


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
