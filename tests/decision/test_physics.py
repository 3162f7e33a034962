"""Physics as a check: measurements faster than the device's peaks are refused, honest ones are not."""

from __future__ import annotations

import pytest

from orchestrator.decision.physics import (
    TOLERANCE,
    case_rate,
    device_peaks_line,
    impossible_cases,
    physics_verdict,
)
from protocol.devices import DEVICE_PEAKS, DevicePeaks, peaks_for
from protocol.results import CaseMeasurement, Evaluation, EvaluationStatus, SampleStats

SYNTHETIC = DevicePeaks(name="Synthetic", name_pattern="Synthetic", memory_bytes_per_s=1e12,
                        flop_per_s={"float16": 100e12, "tfloat32": 50e12}, source="a test's own device")
MiB = 2**20


def _stats(median: float) -> SampleStats:
    return SampleStats(n=10, median=median, p95=median, mean=median, stdev=0.0, cv=0.0, min=median, max=median)


def _evaluation(device: str, **cases: tuple[float, dict]) -> Evaluation:
    return Evaluation(label="candidate", status=EvaluationStatus.OK, worker={"device": device},
                      cases=[CaseMeasurement(case_id=case_id, protected=True, weight=1.0, correct=True,
                                             stats=_stats(median), metrics={f"benchmark.{k}": v for k, v in figures.items()})
                             for case_id, (median, figures) in cases.items()])


def test_a_rate_above_the_memory_peak_beyond_what_l2_can_hold_is_impossible():
    # 1 GB in 500 µs is 2 TB/s on a 1 TB/s device; 60 MiB of it may sit in L2: still 1.87 TB/s
    rate = case_rate("big", 500.0, {"benchmark.bytes": 1e9, "benchmark.device.l2_bytes": 60 * MiB}, SYNTHETIC)
    assert rate.impossible is not None
    assert rate.impossible.startswith("big: 2.0 TB/s (1000.0 MB in 500.00 µs)")
    assert "> 1.00 TB/s, the Synthetic memory peak" in rate.impossible
    assert rate.percent_of_memory_peak == pytest.approx(200.0)


def test_an_honest_rate_and_one_that_only_l2_explains_are_possible():
    honest = case_rate("honest", 1100.0, {"benchmark.bytes": 1e9}, SYNTHETIC)  # 0.91 TB/s
    assert honest.impossible is None and honest.percent_of_memory_peak == pytest.approx(90.9, abs=0.1)
    # 100 MB in 80 µs reads 1.25 TB/s, but 60 MiB of the outputs may still be in L2 when the kernel ends
    small = case_rate("small", 80.0, {"benchmark.bytes": 100e6, "benchmark.device.l2_bytes": 60 * MiB}, SYNTHETIC)
    assert small.impossible is None
    within = case_rate("edge", 1000.0 / (1 + TOLERANCE / 2), {"benchmark.bytes": 1e9}, SYNTHETIC)
    assert within.impossible is None


def test_flops_above_the_peak_of_their_dtype_are_impossible_and_an_unknown_dtype_gets_the_highest_peak():
    gemm = {"benchmark.bytes": 100e6, "benchmark.flops": 2 * 4096**3}
    fp16 = case_rate("g", 1000.0, {**gemm, "benchmark.flop_dtype": "float16"}, SYNTHETIC)  # 137 TFLOP/s
    assert fp16.impossible is not None and "> 100 TFLOP/s, the Synthetic float16 peak" in fp16.impossible
    assert case_rate("g", 2000.0, {**gemm, "benchmark.flop_dtype": "float16"}, SYNTHETIC).impossible is None
    tf32 = case_rate("g", 2000.0, {**gemm, "benchmark.flop_dtype": "float32"}, SYNTHETIC)  # 68.7 > 50
    assert tf32.impossible is not None
    assert case_rate("g", 2000.0, gemm, SYNTHETIC).impossible is None  # no dtype: the highest peak, 100


def test_the_h200_figures_of_the_red_team_runs_are_impossible_and_the_honest_copy_ceiling_is_not():
    h200 = peaks_for("NVIDIA H200")
    vector_add = {"benchmark.bytes": 12.0 * 16_777_216, "benchmark.device.l2_bytes": 60 * MiB}
    assert case_rate("n16M", 5.9, vector_add, h200).impossible is not None  # warm-up steering: 34 TB/s
    assert case_rate("n16M", 52.0, vector_add, h200).impossible is None  # the honest copy ceiling: 3.9 TB/s
    matmul = {"benchmark.bytes": 3 * 2 * 4096**2, "benchmark.flops": 2 * 4096**3, "benchmark.flop_dtype": "float16"}
    assert case_rate("4096", 25.0, matmul, h200).impossible is not None  # a memo: 5.5 PFLOP/s
    assert case_rate("4096", 180.0, matmul, h200).impossible is None  # cuBLAS: 764 TFLOP/s


def test_an_evaluation_is_judged_against_the_device_its_worker_reported():
    fast = _evaluation("NVIDIA H200", n16M=(5.9, {"bytes": 12.0 * 16_777_216}))
    assert impossible_cases(fast) and physics_verdict(fast, untouched=False).startswith("faster than the device")
    assert "fix its work()" in physics_verdict(fast, untouched=True)
    assert impossible_cases(_evaluation("cpu", n16M=(5.9, {"bytes": 12.0 * 16_777_216}))) == []
    assert impossible_cases(_evaluation("NVIDIA H200", n16M=(5.9, {}))) == []  # no work figures: nothing to check
    assert "no physics check" in device_peaks_line("cpu")
    assert "H200 SXM" in device_peaks_line("NVIDIA H200")


def test_every_device_in_the_table_names_its_source_and_is_found_by_the_name_torch_reports():
    for entry in DEVICE_PEAKS:
        assert entry.source and entry.memory_bytes_per_s > 0 and entry.flop_per_s
    names = {"NVIDIA H200": "H200 SXM", "NVIDIA H100 80GB HBM3": "H100 SXM", "NVIDIA H100 PCIe": "H100 PCIe",
             "NVIDIA A100-SXM4-80GB": "A100 80GB SXM", "NVIDIA GH200 480GB": "GH200", "NVIDIA L4": "L4"}
    assert {name: peaks_for(name).name for name in names} == names
    assert peaks_for("Tesla T4") is None and peaks_for(None) is None
