"""The raw-CSV parser against real H200 output: units, thousands separators, n/a, absent metrics."""

from __future__ import annotations

import pytest

from sandbox_worker.harness_kit.ncu import SUMMARY_METRICS, parse_ncu_raw_csv


def test_fixture_without_base_units(fixtures):
    parsed = parse_ncu_raw_csv((fixtures / "h200_vector_add.raw.csv").read_text(), "summary")
    summary = parsed["summary"]
    assert parsed["launches"] == 1
    assert parsed["kernel_names"] == ["add_kernel"]
    assert summary["duration_us"] == pytest.approx(44.736)  # printed in "us"
    assert summary["registers_per_thread"] == 26
    assert summary["sm_throughput_pct"] == pytest.approx(5.818773)
    assert summary["achieved_occupancy_pct"] == pytest.approx(79.719367)
    # launch geometry falls back to the fixed "(128, 1, 1)" columns when launch__* metrics are absent
    assert summary["block_size"] == 128
    assert summary["grid_size"] == 16384
    assert set(summary) == {spec.field for spec in SUMMARY_METRICS}


def test_metric_absent_from_csv_is_null_with_a_diagnostic_naming_it(fixtures):
    parsed = parse_ncu_raw_csv((fixtures / "h200_vector_add.raw.csv").read_text(), "summary")
    summary = parsed["summary"]
    for field, metric in (("dram_throughput_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                          ("theoretical_occupancy_pct", "sm__maximum_warps_per_active_cycle_pct"),
                          ("local_load_bytes", "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"),
                          ("l2_hit_rate_pct", "lts__t_sector_hit_rate.pct")):
        assert summary[field] is None, field
        assert any(metric in line and field in line for line in parsed["diagnostics"]), metric
    assert not any("duration_us" in line for line in parsed["diagnostics"])


def test_base_units_and_thousands_separators(fixtures):
    parsed = parse_ncu_raw_csv((fixtures / "h200_vector_add_base_units.raw.csv").read_text(), "summary")
    summary = parsed["summary"]
    assert summary["duration_us"] == pytest.approx(44.544)  # "44,544" ns
    assert summary["grid_size"] == 16384  # "16,384" from launch__grid_size
    assert summary["dram_throughput_pct"] == pytest.approx(84.61)
    assert summary["local_load_bytes"] == 0.0 and summary["local_store_bytes"] == 0.0  # measured zeros stay 0
    assert summary["theoretical_occupancy_pct"] == 100
    assert parsed["units"]["duration_us"] == "ns"
    assert parsed["diagnostics"] == []


HEADER = '"ID","Kernel Name","Block Size","gpu__time_duration.sum","l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed"\n'


def test_na_values_are_null_with_a_diagnostic():
    text = HEADER + '"","","","nsecond","Kbyte","%"\n"0","k","(256, 1, 1)","1,500","n/a","n/a"\n'
    parsed = parse_ncu_raw_csv(text, "summary")
    assert parsed["summary"]["duration_us"] == pytest.approx(1.5)
    assert parsed["summary"]["local_load_bytes"] is None
    assert parsed["summary"]["sm_throughput_pct"] is None
    assert any("n/a" in line and "sm__throughput" in line for line in parsed["diagnostics"])


def test_units_are_converted_and_unknown_units_give_null():
    text = HEADER + '"","","","msecond","Kbyte","%"\n"0","k","(256, 1, 1)","2","1.5","50"\n'
    parsed = parse_ncu_raw_csv(text, "summary")
    assert parsed["summary"]["duration_us"] == pytest.approx(2000.0)
    assert parsed["summary"]["local_load_bytes"] == pytest.approx(1500.0)
    bad = HEADER + '"","","","fortnight","byte","%"\n"0","k","(256, 1, 1)","2","1","50"\n'
    parsed = parse_ncu_raw_csv(bad, "summary")
    assert parsed["summary"]["duration_us"] is None
    assert any("fortnight" in line for line in parsed["diagnostics"])


def test_several_launches_give_the_median_and_status_lines_are_skipped():
    text = ("==PROF== Connected to process 1\n==WARNING== something\n" + HEADER
            + '"","","","ns","byte","%"\n'
            + '"0","k","(64, 1, 1)","1,000","0","10"\n"1","k","(64, 1, 1)","3,000","0","30"\n'
            + '"2","k","(64, 1, 1)","2,000","0","20"\n')
    parsed = parse_ncu_raw_csv(text, "summary")
    assert parsed["launches"] == 3
    assert parsed["summary"]["duration_us"] == pytest.approx(2.0)
    assert parsed["summary"]["sm_throughput_pct"] == pytest.approx(20.0)


def test_launches_of_several_kernels_are_flagged():
    text = HEADER + '"","","","ns","byte","%"\n"0","a","(64, 1, 1)","1000","0","10"\n"1","b","(64, 1, 1)","3000","0","30"\n'
    parsed = parse_ncu_raw_csv(text, "summary")
    assert parsed["kernel_names"] == ["a", "b"]
    assert any("several kernels" in line for line in parsed["diagnostics"])


def test_empty_output_is_all_null_with_a_diagnostic():
    parsed = parse_ncu_raw_csv("==WARNING== No kernels were profiled.\n", "deep")
    assert parsed["launches"] == 0
    assert all(value is None for value in parsed["summary"].values())
    assert all(value is None for value in parsed["deep"].values())
    assert parsed["diagnostics"] and "no metric rows" in parsed["diagnostics"][0]


def test_deep_level_reports_stalls_and_names_missing_stall_metrics(fixtures):
    parsed = parse_ncu_raw_csv((fixtures / "h200_vector_add.raw.csv").read_text(), "deep")
    assert parsed["stalls"] is not None and all(value is None for value in parsed["stalls"].values())
    assert "long_scoreboard_pct" in parsed["stalls"]
    assert not any(key.endswith("_per_issue") for key in parsed["stalls"])
    assert any("smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct" in line
               for line in parsed["diagnostics"])
    text = ('"ID","Kernel Name","smsp__warp_issue_stalled_barrier_per_warp_active.pct",'
            '"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"\n'
            '"","","%","inst"\n"0","k","12.5","0.75"\n')
    stalls = parse_ncu_raw_csv(text, "deep")["stalls"]
    assert stalls["barrier_pct"] == 12.5 and stalls["barrier_per_issue"] == 0.75
    assert stalls["wait_pct"] is None


def test_unknown_level_is_rejected():
    with pytest.raises(ValueError):
        parse_ncu_raw_csv("", "full")
