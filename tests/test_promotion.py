"""The promotion test against simulated H200 noise, its gates, edge cases and the measurement schedule.

Simulated noise follows the H200 figures in docs/results/2026-11-30-measurement-study.md: a between-process drift of 0.2 % (log std-dev, shared by
every case of a worker run) and a within-run CV of 1 %; A/B/A order as the orchestrator measures by default.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.decision.bootstrap import PromotionTest, promotion_test
from orchestrator.decision.schedule import measurement_schedule

DRIFT = 0.002
WITHIN_RUN_CV = 0.01
SAMPLES_PER_RUN = 50
SIMULATION_RESAMPLES = 400

Runs = dict[str, list[list[float]]]


def simulated_trials(
    trials: int,
    gain: float,
    *,
    seed: int,
    schedule: str = "aba",
    case_weights: dict[str, float] | None = None,
) -> list[tuple[Runs, Runs]]:
    """(candidate, incumbent) runs per trial; the candidate's true speedup is 1 + gain."""
    case_weights = case_weights or {"case": 1.0}
    rng = np.random.default_rng(seed)
    run_drift = np.exp(rng.normal(0.0, DRIFT, size=(trials, len(schedule))))
    base_us = {case_id: 100.0 * (index + 1) for index, case_id in enumerate(case_weights)}
    within = {
        case_id: 1.0 + rng.normal(0.0, WITHIN_RUN_CV, size=(trials, len(schedule), SAMPLES_PER_RUN))
        for case_id in case_weights
    }
    result = []
    for trial in range(trials):
        candidate: Runs = {case_id: [] for case_id in case_weights}
        incumbent: Runs = {case_id: [] for case_id in case_weights}
        for position, letter in enumerate(schedule):
            for case_id in case_weights:
                true_us = base_us[case_id] / (1.0 + gain) if letter == "b" else base_us[case_id]
                samples = true_us * run_drift[trial, position] * within[case_id][trial, position]
                (candidate if letter == "b" else incumbent)[case_id].append(samples.tolist())
        result.append((candidate, incumbent))
    return result


def promotion_rates(
    trials: int, gain: float, *, seed: int, case_weights: dict[str, float] | None = None
) -> tuple[float, float]:
    """(share of trials above noise, share promoted at min_speedup 1.01)."""
    case_weights = case_weights or {"case": 1.0}
    results = [
        promotion_test(candidate, incumbent, case_weights, 1.01, resamples=SIMULATION_RESAMPLES, seed=trial)
        for trial, (candidate, incumbent) in enumerate(
            simulated_trials(trials, gain, seed=seed, case_weights=case_weights)
        )
    ]
    return (
        sum(r.passes_noise for r in results) / trials,
        sum(r.passes for r in results) / trials,
    )


# --- simulated studies ------------------------------------------------------------------------------------


def test_a_a_study_false_promotions_stay_at_or_below_one_percent() -> None:
    # 5000 trials of this simulation measured 0.5 % above noise and 0.1 % promoted (min_speedup 1.01).
    above_noise, promoted = promotion_rates(300, 0.0, seed=11)
    assert promoted <= 0.01
    assert above_noise <= 0.01


def test_a_a_study_with_two_weighted_cases_and_shared_drift() -> None:
    above_noise, promoted = promotion_rates(200, 0.0, seed=12, case_weights={"big": 3.0, "small": 1.0})
    assert promoted <= 0.01
    assert above_noise <= 0.01


@pytest.mark.parametrize("gain", [0.03, 0.05])
def test_true_gain_of_three_and_five_percent_is_promoted(gain: float) -> None:
    above_noise, promoted = promotion_rates(300, gain, seed=13)
    assert promoted >= 0.95
    assert above_noise >= promoted


def test_true_gain_of_two_percent_is_mostly_promoted() -> None:
    # 3000 trials of this simulation measured 97 % promoted (1.5 %: 85 %): the A-A spread seen in one A/B/A
    # sometimes widens the interval past a 2 % gain.
    _, promoted = promotion_rates(300, 0.02, seed=14)
    assert promoted >= 0.9


def test_gain_is_not_promoted_when_the_incumbent_disagrees_with_itself() -> None:
    rng = np.random.default_rng(3)

    def run(true_us: float) -> list[float]:
        return (true_us * (1.0 + rng.normal(0.0, WITHIN_RUN_CV, SAMPLES_PER_RUN))).tolist()

    candidate = {"case": [run(102.0 / 1.03)]}
    disagreeing = promotion_test(candidate, {"case": [run(100.0), run(104.0)]}, {"case": 1.0}, 1.01)
    assert disagreeing.point_speedup == pytest.approx(1.03, abs=0.005)
    assert not disagreeing.passes_noise
    assert not disagreeing.passes
    assert disagreeing.per_case["case"].between_run_spread == pytest.approx(
        math.log(1.04) / math.sqrt(2), rel=0.1
    )
    assert "within noise" in disagreeing.reason

    agreeing = promotion_test(candidate, {"case": [run(102.0), run(102.0)]}, {"case": 1.0}, 1.01)
    assert agreeing.passes, agreeing.reason


def test_the_same_seed_gives_the_same_result_and_the_mapping_order_does_not_matter() -> None:
    candidate, incumbent = simulated_trials(1, 0.01, seed=5, case_weights={"x": 1.0, "y": 2.0})[0]
    weights = {"x": 1.0, "y": 2.0}
    first = promotion_test(candidate, incumbent, weights, 1.01, seed=42)
    again = promotion_test(candidate, incumbent, weights, 1.01, seed=42)
    reordered = promotion_test(
        dict(reversed(candidate.items())), dict(reversed(incumbent.items())), weights, 1.01, seed=42
    )
    other_seed = promotion_test(candidate, incumbent, weights, 1.01, seed=43)
    assert first.model_dump() == again.model_dump() == reordered.model_dump()
    assert other_seed.lower_bound != first.lower_bound
    assert other_seed.point_speedup == first.point_speedup


def test_small_real_gain_is_above_noise_but_below_min_speedup() -> None:
    rng = np.random.default_rng(9)

    def run(true_us: float) -> list[float]:
        return (true_us * (1.0 + rng.normal(0.0, 0.0001, 200))).tolist()

    candidate = {"case": [run(100.0 / 1.005)]}
    incumbent = {"case": [run(100.0), run(100.0)]}
    # A 0.5 % gain is below the default 0.2 % floor's reach (2.3 sd of sqrt(1.5) * 0.2 %): this bench is quieter.
    result = promotion_test(candidate, incumbent, {"case": 1.0}, 1.01, noise_floor=0.0005)
    assert result.point_speedup == pytest.approx(1.005, abs=1e-4)
    assert result.passes_noise
    assert not result.passes
    assert "< min 1.0100x" in result.reason
    assert promotion_test(candidate, incumbent, {"case": 1.0}, 1.004, noise_floor=0.0005).passes


# --- point estimate and weights ---------------------------------------------------------------------------


def test_point_speedup_is_the_weighted_geomean_of_case_speedups() -> None:
    incumbent = {"fast": [[110.0], [110.0]], "same": [[50.0], [50.0]], "ignored": [[10.0], [10.0]]}
    candidate = {"fast": [[100.0]], "same": [[50.0]], "ignored": [[5.0]]}
    result = promotion_test(candidate, incumbent, {"fast": 3.0, "same": 1.0, "ignored": 0.0}, 1.01)
    assert result.per_case["fast"].speedup == pytest.approx(1.1)
    assert result.per_case["same"].speedup == pytest.approx(1.0)
    assert result.per_case["ignored"].speedup == 2.0
    assert result.point_speedup == pytest.approx(1.1**0.75)
    assert result.lower_bound < result.point_speedup < result.upper_bound


def test_incumbent_median_is_the_geometric_mean_of_its_run_medians() -> None:
    result = promotion_test(
        {"c": [[100.0, 101.0, 99.0]]}, {"c": [[100.0, 99.0, 100.5], [121.0]]}, {"c": 1.0}, 1.01
    )
    case = result.per_case["c"]
    assert case.incumbent_run_medians == [100.0, 121.0]
    assert case.candidate_run_medians == [100.0]
    assert case.speedup == pytest.approx(1.1)
    assert case.between_run_spread == pytest.approx(math.log(1.21) / math.sqrt(2))


# --- edge cases -------------------------------------------------------------------------------------------


def test_one_sample_per_run_relies_on_the_noise_floor() -> None:
    result = promotion_test({"c": [[97.0]]}, {"c": [[100.0], [100.0]]}, {"c": 1.0}, 1.01)
    assert result.point_speedup == pytest.approx(100 / 97)
    assert result.noise_estimate == pytest.approx(0.002 * math.sqrt(1.5), rel=0.1)
    assert result.lower_bound < result.point_speedup
    assert result.passes


def test_identical_inputs_never_pass() -> None:
    runs = simulated_trials(1, 0.0, seed=8)[0][1]["case"]
    identical = promotion_test({"c": runs}, {"c": runs}, {"c": 1.0}, 1.0)
    assert identical.point_speedup == 1.0
    assert identical.lower_bound < 1.0 < identical.upper_bound
    assert not identical.passes_noise and not identical.passes

    single = promotion_test({"c": [[100.0]]}, {"c": [[100.0]]}, {"c": 1.0}, 1.0)
    assert not single.passes_noise
    no_floor = promotion_test({"c": [[100.0]]}, {"c": [[100.0]]}, {"c": 1.0}, 1.0, noise_floor=0.0)
    assert no_floor.lower_bound == 1.0
    assert not no_floor.passes_noise  # "above noise" is strict


def test_huge_cv_inputs_stay_within_noise() -> None:
    rng = np.random.default_rng(4)
    incumbent = {"c": [(100.0 * rng.lognormal(0.0, 1.0, 30)).tolist() for _ in range(2)]}
    candidate = {"c": [(97.0 * rng.lognormal(0.0, 1.0, 30)).tolist()]}
    result = promotion_test(candidate, incumbent, {"c": 1.0}, 1.01)
    assert not result.passes_noise
    assert result.noise_estimate > 0.1
    assert all(math.isfinite(v) for v in (result.point_speedup, result.lower_bound, result.upper_bound))


def test_long_runs_are_bootstrapped_in_bounded_chunks() -> None:
    rng = np.random.default_rng(6)
    incumbent = {"c": [(100.0 * (1 + rng.normal(0, 0.01, 20_000))).tolist() for _ in range(2)]}
    candidate = {"c": [(95.0 * (1 + rng.normal(0, 0.01, 20_000))).tolist()]}
    result = promotion_test(candidate, incumbent, {"c": 1.0}, 1.01, resamples=200)
    assert result.passes
    assert result.point_speedup == pytest.approx(100 / 95, rel=0.002)


def test_persisted_result_is_compact_and_round_trips() -> None:
    candidate, incumbent = simulated_trials(1, 0.03, seed=2)[0]
    result = promotion_test(candidate, incumbent, {"case": 1.0}, 1.01)
    dump = result.model_dump()
    assert len(json.dumps(dump)) < 1500
    assert PromotionTest.model_validate(dump) == result
    assert result.method.startswith("two-level bootstrap")
    assert result.reason.startswith(f"speedup {result.point_speedup:.4f}x, 99% lower bound")
    assert result.reason.endswith(f"> 1.0 (noise {result.noise_estimate:.2%})")


@pytest.mark.parametrize(
    ("candidate", "incumbent", "weights", "message"),
    [
        ({}, {}, {}, "no cases"),
        ({"a": [[1.0]]}, {"b": [[1.0]]}, {"a": 1.0, "b": 1.0}, "cases differ"),
        ({"a": [[1.0]]}, {"a": [[1.0]]}, {}, "weight"),
        ({"a": [[1.0]]}, {"a": [[1.0]]}, {"a": -1.0}, "weight"),
        ({"a": [[1.0]]}, {"a": [[1.0]]}, {"a": 0.0}, "sum to 0"),
        ({"a": []}, {"a": [[1.0]]}, {"a": 1.0}, "candidate has no runs"),
        ({"a": [[1.0]]}, {"a": [[1.0], []]}, {"a": 1.0}, "incumbent run 1 has no samples"),
        ({"a": [[1.0, 0.0]]}, {"a": [[1.0]]}, {"a": 1.0}, "not a positive number"),
        ({"a": [[1.0, math.nan]]}, {"a": [[1.0]]}, {"a": 1.0}, "not a positive number"),
    ],
)
def test_invalid_inputs_are_refused_with_a_clear_message(
    candidate: Runs, incumbent: Runs, weights: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        promotion_test(candidate, incumbent, weights, 1.01)


@pytest.mark.parametrize(
    ("keyword", "value"), [("confidence", 1.0), ("confidence", 0.5), ("resamples", 10), ("noise_floor", -0.1)]
)
def test_invalid_settings_are_refused(keyword: str, value: float) -> None:
    with pytest.raises(ValueError, match=keyword):
        promotion_test({"a": [[1.0]]}, {"a": [[1.0]]}, {"a": 1.0}, 1.01, **{keyword: value})


@settings(max_examples=25, deadline=None)
@given(scale=st.floats(min_value=1e-3, max_value=1e3), seed=st.integers(0, 2**16))
def test_result_does_not_depend_on_the_time_unit(scale: float, seed: int) -> None:
    candidate, incumbent = simulated_trials(1, 0.02, seed=seed)[0]
    scaled = {c: [[s * scale for s in run] for run in runs] for c, runs in candidate.items()}
    scaled_incumbent = {c: [[s * scale for s in run] for run in runs] for c, runs in incumbent.items()}
    base = promotion_test(candidate, incumbent, {"case": 1.0}, 1.01, resamples=200, seed=seed)
    rescaled = promotion_test(scaled, scaled_incumbent, {"case": 1.0}, 1.01, resamples=200, seed=seed)
    assert rescaled.point_speedup == pytest.approx(base.point_speedup, rel=1e-9)
    assert rescaled.lower_bound == pytest.approx(base.lower_bound, rel=1e-9)
    assert rescaled.upper_bound == pytest.approx(base.upper_bound, rel=1e-9)
    assert base.lower_bound <= base.point_speedup <= base.upper_bound


# --- measurement schedule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("aba", ["incumbent", "candidate", "incumbent"]),
        ("ab", ["incumbent", "candidate"]),
        ("abab", ["incumbent", "candidate", "incumbent", "candidate"]),
        ("abba", ["incumbent", "candidate", "candidate", "incumbent"]),
        ("baab", ["candidate", "incumbent", "incumbent", "candidate"]),
        (" ABA ", ["incumbent", "candidate", "incumbent"]),
        ("ababab", ["incumbent", "candidate"] * 3),
    ],
)
def test_measurement_schedule_parses_orders(pattern: str, expected: list[str]) -> None:
    assert measurement_schedule(pattern) == expected


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", "empty"),
        ("abc", r"letters \['c'\]"),
        ("a-b", "only a"),
        ("aaa", "both the incumbent"),
        ("b", "both the incumbent"),
        ("abababa", "at most 6"),
    ],
)
def test_measurement_schedule_refuses_bad_orders(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        measurement_schedule(pattern)
