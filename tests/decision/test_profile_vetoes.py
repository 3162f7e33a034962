"""The profile cross-checks: a benchmark speedup the kernel times do not back, and GPU work moved
out of `main_scope`. Figures from H200 runs (docs/data/h200-judge-default-2026-12-01.txt)."""

from __future__ import annotations

from orchestrator.decision.profile_rules import (
    gpu_time_speedup,
    kernel_speedups,
    outside_main_scope_veto,
    unbacked_speedup_veto,
)


def _profile(main_us: float, other_us: float = 0.0, ncu_us: float | None = None) -> dict:
    profile = {"proton": {"main_kernel_us": main_us, "non_main_kernel_us": other_us}}
    if ncu_us is not None:
        profile["ncu"] = {"summary": {"duration_us": ncu_us}}
    return profile


def test_honest_speedups_are_backed_by_the_kernel_times():
    # softmax 4096x4096, promoted on the H200: benchmark 2.444x, Proton 95.55 -> 37.25 us, NCU 91.97 -> 36.51 us
    speeds = kernel_speedups(_profile(37.248, ncu_us=36.512), _profile(95.552, ncu_us=91.968))
    assert unbacked_speedup_veto("rows4096_cols4096", 2.444, speeds) is None
    # the matmul candidate with register spills: the benchmark saw less gain than the kernels, never vetoed here
    assert unbacked_speedup_veto("m2048", 0.563, kernel_speedups(_profile(195.31), _profile(141.0))) is None


def test_a_timer_patch_over_an_unchanged_kernel_is_vetoed():
    # event_elapsed_div8: the kernels ran as long as the incumbent's, the events said 1/8
    speeds = kernel_speedups(_profile(159.15, ncu_us=160.03), _profile(159.76, ncu_us=160.26))
    text = unbacked_speedup_veto("n16M", 8.07, speeds)
    assert text is not None and text.startswith("case n16M: the benchmark's speedup 8.0700x is not backed")
    assert "best 1.0" in text


def test_dropping_a_copy_kernel_is_backed_by_the_time_over_all_kernels():
    # the main kernel is unchanged; the incumbent's extra 100 us copy kernel is gone: 2x, honestly
    candidate, incumbent = _profile(100.0, ncu_us=100.0), _profile(100.0, other_us=100.0, ncu_us=100.0)
    main_only = kernel_speedups(candidate, incumbent)
    assert unbacked_speedup_veto("n16M", 1.98, main_only) is not None  # main-kernel times alone would veto it
    backing = {**main_only, "proton_all_kernels": gpu_time_speedup(candidate, incumbent)}
    assert unbacked_speedup_veto("n16M", 1.98, backing) is None


def test_no_kernel_times_no_cross_check():
    assert unbacked_speedup_veto("n16M", 8.0, {"proton": None, "ncu": None}) is None
    assert unbacked_speedup_veto("n16M", None, {"proton": 1.0, "ncu": None}) is None


def test_work_handed_to_another_kernel_is_vetoed():
    text = outside_main_scope_veto("n16M", _profile(5.0, other_us=150.0), _profile(160.0))
    assert text is not None and "150.000us more GPU time outside main_scope" in text
    assert "allow_work_outside_main_scope" in text


def test_a_small_helper_kernel_is_not_vetoed():
    # a zero fill of an accumulator: 3 us beside a 200 us main kernel
    assert outside_main_scope_veto("m4096", _profile(200.0, other_us=3.0), _profile(1369.0)) is None
    # work that was outside main_scope before stays allowed
    assert outside_main_scope_veto("n16M", _profile(100.0, other_us=50.0), _profile(120.0, other_us=50.0)) is None
    assert outside_main_scope_veto("n16M", None, _profile(120.0)) is None
