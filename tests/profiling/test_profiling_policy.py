"""Escalation rules, disagreement, the NCU regression veto, deltas with nulls, and the log line."""

from __future__ import annotations

import json

import pytest

from orchestrator.decision.profile_rules import (
    PairedTimes,
    deep_profile_reasons,
    kernel_speedups,
    measurements_disagree,
    ncu_regression_veto,
    ncu_veto_unavailable_reason,
    near_threshold,
    profile_deltas,
)
from orchestrator.ledger.reporting import format_profile_for_log


def _profile(duration=None, *, main=None, wrapper=None, non_main=None, sm=None, dram=None, occupancy=None,
             spills=None, proton_available=True) -> dict:
    """The shape profile_with_kit returns, trimmed to what the policy reads."""
    return {
        "level": "summary", "tools": ["proton_launch", "ncu"], "scope": {},
        "proton": {"available": proton_available, "wrapper_us": wrapper, "main_kernel_us": main,
                   "non_main_kernel_us": non_main},
        "ncu": {"available": duration is not None,
                "summary": {"duration_us": duration, "sm_throughput_pct": sm, "dram_throughput_pct": dram,
                            "achieved_occupancy_pct": occupancy, "registers_per_thread": None,
                            "local_load_bytes": spills, "local_store_bytes": spills}},
        "diagnostics": [], "artifacts": {},
    }


def _reasons(**overrides):
    arguments = {"is_baseline": False, "is_finalist": False, "correct": True, "speedup": 1.05, "min_speedup": 1.01,
                 "rounds_without_promotion": 0, "disagreement": None, **overrides}
    return deep_profile_reasons(**arguments)


def test_escalation_reasons():
    assert _reasons() == []
    assert _reasons(is_baseline=True, speedup=None) == ["baseline"]
    assert _reasons(is_finalist=True, speedup=1.2) == ["finalist"]
    assert _reasons(speedup=1.005) == ["near_threshold"]
    assert _reasons(speedup=1.02) == ["near_threshold"]
    assert _reasons(speedup=1.0201) == []
    assert _reasons(rounds_without_promotion=2) == ["stagnation"]
    assert _reasons(rounds_without_promotion=1) == []
    assert _reasons(rounds_without_promotion=3, stagnation_rounds=4) == []
    assert _reasons(disagreement="benchmark 1.2x vs ncu 0.9x") == ["disagreement"]
    assert _reasons(speedup=1.01, rounds_without_promotion=5, disagreement=True) == [
        "near_threshold", "stagnation", "disagreement"]


def test_no_deep_profile_for_incorrect_or_clearly_slow_candidates():
    assert _reasons(correct=False, speedup=1.01, rounds_without_promotion=5, disagreement="x") == []
    assert _reasons(correct=False, is_finalist=True) == []
    assert _reasons(speedup=0.95, rounds_without_promotion=5, disagreement="x") == []
    assert _reasons(speedup=0.9999, min_speedup=1.01) == []  # 1.01 - 0.01 - 0.0001: clearly slow
    assert _reasons(speedup=1.0, min_speedup=1.01) == ["near_threshold"]  # exactly one point below


def test_near_threshold():
    assert near_threshold(1.01, 1.01) and near_threshold(1.0, 1.01) and near_threshold(1.02, 1.01)
    assert not near_threshold(1.0205, 1.01) and not near_threshold(0.99, 1.01)
    assert not near_threshold(None, 1.01) and not near_threshold(float("nan"), 1.01)
    assert near_threshold(1.04, 1.01, window=0.05)


def times(**pairs: tuple[float | None, float | None]) -> dict[str, PairedTimes]:
    return {name: PairedTimes(*pair) for name, pair in pairs.items()}


def test_measurements_disagree_when_neither_the_ratio_nor_the_time_saved_agrees():
    assert measurements_disagree(times(benchmark=(110.0, 100.0), proton=(108.0, 100.0), ncu=(109.0, 100.0))) is None
    assert measurements_disagree(times(benchmark=(110.0, 100.0), proton=(None, 90.0), ncu=(None, None))) is None
    why = measurements_disagree(times(benchmark=(120.0, 100.0), proton=(119.0, 100.0), ncu=(98.0, 100.0)))
    assert why is not None and why.startswith("benchmark speedup 1.2000x vs ncu speedup 0.9800x differ by 22.4%")
    assert why.endswith("and the time they save (20.0 vs -2.0 us) by 18.3% of 120.0 us (> 5%)")
    assert measurements_disagree(times(benchmark=(100.0, 100.0), proton=(104.0, 100.0))) is None
    assert measurements_disagree(times(benchmark=(100.0, 100.0), proton=(106.0, 100.0))) is not None
    assert measurements_disagree(times(benchmark=(100.0, 100.0), proton=(106.0, 100.0)), tolerance=0.10) is None
    # a timer patch: the benchmark claims 8x over a kernel the profilers see unchanged
    assert "8.0000x" in measurements_disagree(times(benchmark=(100.0, 12.5), ncu=(90.0, 90.0)))


def test_a_fixed_cost_in_the_endpoint_window_or_a_profiler_clock_is_no_disagreement():
    # H200, matmul 4096^3 (docs/data/h200-search-2026-12-01-priors): 5.78x in the benchmark, 6.31x in NCU, because
    # the benchmark's window holds ~20 us that the kernel change does not touch: 1.14 vs 1.16 ms saved
    assert measurements_disagree(times(benchmark=(1373.7, 237.664), ncu=(1373.1, 217.6))) is None
    # a profiler timing both sides at a lower clock: the same ratio, a larger saving
    assert measurements_disagree(times(benchmark=(200.0, 100.0), ncu=(260.0, 130.0))) is None
    # the next candidate of that run: 1.218x vs 1.131x and 42.5 vs 25.3 us saved: a deep profile is due
    why = measurements_disagree(times(benchmark=(237.2, 194.752), ncu=(217.6, 192.32)))
    assert why is not None and "benchmark speedup 1.2180x vs ncu speedup 1.1314x" in why


def test_kernel_speedups():
    speedups = kernel_speedups(_profile(90.0, main=45.0), _profile(100.0, main=50.0))
    assert speedups == {"proton": pytest.approx(50 / 45), "ncu": pytest.approx(100 / 90)}
    assert kernel_speedups(_profile(None), _profile(100.0)) == {"proton": None, "ncu": None}


def test_regression_veto():
    incumbent = _profile(100.0)
    veto = ncu_regression_veto(_profile(101.5), incumbent)
    assert veto is not None and "101.500us" in veto and "100.000us" in veto and "1.50%" in veto
    assert ncu_regression_veto(_profile(100.5), incumbent) is None
    assert ncu_regression_veto(_profile(95.0), incumbent) is None
    assert ncu_regression_veto(_profile(101.0), incumbent) is None  # exactly 1 % is not "more than 1 %"
    assert ncu_regression_veto(_profile(None), incumbent) is None
    assert ncu_regression_veto(_profile(150.0), _profile(None)) is None
    assert ncu_regression_veto({"spilled": True}, incumbent) is None
    assert ncu_veto_unavailable_reason(_profile(None), incumbent) == (
        "ncu regression veto not checked: no ncu duration for the candidate")
    assert "candidate and incumbent" in ncu_veto_unavailable_reason(None, _profile(None))
    assert ncu_veto_unavailable_reason(_profile(101.0), incumbent) is None


def test_deltas_keep_nulls_null():
    candidate = _profile(90.0, main=45.0, wrapper=None, sm=60.0, dram=None, occupancy=50.0, spills=0.0)
    incumbent = _profile(100.0, main=50.0, wrapper=12.0, sm=50.0, dram=80.0, occupancy=0.0, spills=0.0)
    deltas = profile_deltas(candidate, incumbent)
    assert deltas["ncu.duration_us"] == {"candidate": 90.0, "incumbent": 100.0, "delta": -10.0,
                                         "relative": pytest.approx(-0.1)}
    assert deltas["ncu.sm_throughput_pct"]["relative"] == pytest.approx(0.2)
    assert deltas["ncu.dram_throughput_pct"] == {"candidate": None, "incumbent": 80.0, "delta": None,
                                                 "relative": None}
    assert deltas["ncu.achieved_occupancy_pct"]["delta"] == 50.0
    assert deltas["ncu.achieved_occupancy_pct"]["relative"] is None  # incumbent 0: no relative change
    assert deltas["ncu.local_load_bytes"] == {"candidate": 0.0, "incumbent": 0.0, "delta": 0.0, "relative": None}
    assert deltas["proton.wrapper_us"]["delta"] is None
    assert deltas["proton.main_kernel_us"]["delta"] == -5.0
    json.dumps(deltas, allow_nan=False)
    assert all(entry["delta"] is None for entry in profile_deltas(None, incumbent).values())


def test_log_line():
    candidate = _profile(90.0, main=45.0, wrapper=12.5, non_main=0.0, sm=60.0, dram=80.0, occupancy=50.0, spills=0.0)
    incumbent = _profile(100.0, main=50.0, wrapper=12.0, sm=50.0, dram=80.0, occupancy=50.0, spills=0.0)
    line = format_profile_for_log(candidate, profile_deltas(candidate, incumbent))
    assert "\n" not in line
    assert line.startswith("proton.wrapper_us=12.5 proton.main_kernel_us=45 proton.non_main_kernel_us=0 ")
    assert "ncu.duration_us=90 " in line and "ncu.registers_per_thread=null" in line
    assert "delta.ncu.duration_us=-10(-10.00%)" in line
    assert "delta.ncu.dram_throughput_pct=+0(+0.00%)" in line
    assert "native_profiler" not in line


def test_log_line_without_ncu_or_proton():
    profile = _profile(None, main=None, wrapper=None, proton_available=False)
    line = format_profile_for_log(profile, profile_deltas(profile, _profile(100.0)))
    assert line == "profile=unavailable"
    line = format_profile_for_log(_profile(None, main=5.0, wrapper=1.0, non_main=None), None)
    assert line == "proton.wrapper_us=1 proton.main_kernel_us=5 proton.non_main_kernel_us=null native_profiler=unavailable"
    assert format_profile_for_log({"proton": None, "ncu": None}, {}) == "profile=unavailable"
    assert format_profile_for_log(None, None) == "profile=unavailable"
