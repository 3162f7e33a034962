"""Known inputs -> known outputs for the per-case statistics the orchestrator persists."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.decision.statistics import geometric_mean, percentile, sample_stats, weighted_geomean


def test_sample_stats_of_five_known_samples() -> None:
    stats = sample_stats([5.0, 1.0, 4.0, 2.0, 3.0])
    assert stats.n == 5
    assert stats.median == 3.0
    assert stats.p95 == pytest.approx(4.8)  # rank 0.95 * 4 = 3.8: 4 + 0.8 * (5 - 4)
    assert stats.mean == 3.0
    assert stats.stdev == pytest.approx(math.sqrt(2.5))  # sample (n - 1) standard deviation
    assert stats.cv == pytest.approx(math.sqrt(2.5) / 3.0)
    assert (stats.min, stats.max) == (1.0, 5.0)


def test_sample_stats_median_of_even_count_is_the_midpoint() -> None:
    stats = sample_stats([4.0, 1.0, 3.0, 2.0])
    assert stats.median == 2.5
    assert stats.p95 == pytest.approx(3.85)  # rank 2.85: 3 + 0.85 * (4 - 3)


def test_sample_stats_of_one_sample_has_no_spread() -> None:
    stats = sample_stats([7.5])
    assert (stats.n, stats.median, stats.p95, stats.mean) == (1, 7.5, 7.5, 7.5)
    assert (stats.stdev, stats.cv, stats.min, stats.max) == (0.0, 0.0, 7.5, 7.5)


def test_sample_stats_rejects_no_samples() -> None:
    with pytest.raises(ValueError, match="no samples"):
        sample_stats([])


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([10.0, 20.0], 0.5) == 15.0
    assert percentile([10.0, 20.0, 40.0], 0.75) == 30.0
    assert percentile([10.0, 20.0, 40.0], 1.0) == 40.0
    assert percentile([10.0, 20.0, 40.0], 0.0) == 10.0
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_weighted_geomean_weights_three_to_one() -> None:
    result = weighted_geomean({"a": 2.0, "b": 0.5}, {"a": 3.0, "b": 1.0})
    assert result == pytest.approx((2.0**3 * 0.5) ** 0.25)
    assert result == pytest.approx(math.sqrt(2.0))


def test_weighted_geomean_ignores_weights_of_missing_values() -> None:
    assert weighted_geomean({"a": 4.0}, {"a": 1.0, "b": 9.0}) == pytest.approx(4.0)


def test_weighted_geomean_is_zero_when_nothing_is_left_or_a_value_is_not_positive() -> None:
    assert weighted_geomean({}, {"a": 1.0}) == 0.0
    assert weighted_geomean({"a": 2.0, "b": 0.0}, {"a": 1.0, "b": 1.0}) == 0.0
    assert weighted_geomean({"a": 2.0}, {"a": 0.0}) == 0.0


def test_geometric_mean_of_known_values() -> None:
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([100.0]) == 100.0
    assert geometric_mean([3.3, 3.3, 3.3]) == 3.3
    with pytest.raises(ValueError):
        geometric_mean([])
    with pytest.raises(ValueError):
        geometric_mean([1.0, -1.0])


positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    values=st.dictionaries(st.sampled_from("abcdef"), positive, min_size=1),
    weight=st.floats(min_value=0.1, max_value=10.0),
)
def test_weighted_geomean_lies_between_the_extremes(values: dict[str, float], weight: float) -> None:
    result = weighted_geomean(values, {key: weight for key in values})
    assert min(values.values()) * (1 - 1e-9) <= result <= max(values.values()) * (1 + 1e-9)
    assert result == pytest.approx(geometric_mean(list(values.values())), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(samples=st.lists(positive, min_size=1, max_size=40))
def test_sample_stats_orders_its_summaries(samples: list[float]) -> None:
    stats = sample_stats(samples)
    assert stats.n == len(samples)
    assert stats.min <= stats.median <= stats.p95 <= stats.max
    assert stats.min <= stats.mean * (1 + 1e-12) and stats.mean <= stats.max * (1 + 1e-12)
    assert stats.cv >= 0.0
