"""Pure statistics over raw timing samples (microseconds)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from protocol.results import SampleStats


def percentile(sorted_samples: Sequence[float], fraction: float) -> float:
    """Linear interpolation at rank fraction*(n-1) of already sorted samples."""
    if not sorted_samples:
        raise ValueError("percentile of no samples")
    rank = fraction * (len(sorted_samples) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(sorted_samples) - 1)
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * (rank - low)


def sample_stats(samples: Sequence[float]) -> SampleStats:
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(float(s) for s in samples)
    mean = statistics.fmean(ordered)
    stdev = statistics.stdev(ordered) if len(ordered) > 1 else 0.0
    return SampleStats(
        n=len(ordered),
        median=statistics.median(ordered),
        p95=percentile(ordered, 0.95),
        mean=mean,
        stdev=stdev,
        cv=stdev / mean if mean > 0 else 0.0,
        min=ordered[0],
        max=ordered[-1],
    )


def weighted_geomean(values: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """exp(sum w ln v / sum w) over the keys of `values`; 0.0 when nothing is left or a value is <= 0."""
    total = sum(weights[key] for key in values)
    if total <= 0 or not values:
        return 0.0
    if any(v <= 0 for v in values.values()):
        return 0.0
    return math.exp(sum(weights[key] * math.log(v) for key, v in values.items()) / total)


def geometric_mean(values: Sequence[float]) -> float:
    """exp(mean ln v): the centre of repeated runs whose noise is multiplicative (clock and thermal drift)."""
    if not values:
        raise ValueError("geometric mean of no values")
    if any(v <= 0 for v in values):
        raise ValueError("geometric mean needs positive values")
    if min(values) == max(values):
        return float(values[0])  # exact: one run's (or identical runs') median is reported unchanged
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def pooled_between_run_sd(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """Pooled standard deviation of log run medians within groups of runs of the same source.

    Every time the run re-measures an unchanged source (the incumbent before and after each candidate,
    the baseline again at revalidation) it learns how far fresh processes drift apart. Pooling the
    within-source deviations gives a between-run noise estimate with many degrees of freedom, where a
    single A/B/A triple has one. Returns (sd, degrees of freedom); (0.0, 0) without any repeated source.
    """
    squares, dof = 0.0, 0
    for medians in groups:
        logs = [math.log(m) for m in medians if m > 0]
        if len(logs) < 2:
            continue
        centre = math.fsum(logs) / len(logs)
        squares += math.fsum((x - centre) ** 2 for x in logs)
        dof += len(logs) - 1
    return (math.sqrt(squares / dof), dof) if dof else (0.0, 0)


def student_t_two_sided_mass(t: float, dof: int) -> float:
    """P(|T| < t) for Student's t with an integer `dof` >= 1 (the finite series of Abramowitz & Stegun
    26.7.3/26.7.4, exact up to rounding)."""
    if dof < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {dof}")
    t = abs(t)
    theta = math.atan(t / math.sqrt(dof))
    cos2 = math.cos(theta) ** 2
    if dof % 2 == 1:
        term, total = 1.0, 0.0
        for k in range(1, (dof - 1) // 2 + 1):  # cos θ · (1 + 2/3 cos²θ + 2·4/(3·5) cos⁴θ + ...)
            total += term
            term *= 2 * k / (2 * k + 1) * cos2
        series = math.cos(theta) * total if dof > 1 else 0.0
        return 2.0 / math.pi * (theta + math.sin(theta) * series)
    term, total = 1.0, 0.0
    for k in range(1, dof // 2 + 1):  # 1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + ...
        total += term
        term *= (2 * k - 1) / (2 * k) * cos2
    return math.sin(theta) * total


def student_t_quantile(probability: float, dof: int) -> float:
    """Quantile of Student's t with an integer `dof` >= 1, by bisection on the exact CDF.

    A noise level estimated from few repeats is itself uncertain; scaling it by t/z is how a test with an
    estimated standard deviation keeps its stated confidence (scipy is not a dependency).
    """
    if not 0.0 < probability < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {probability}")
    if probability == 0.5:
        return 0.0
    mass = abs(2.0 * probability - 1.0)  # P(|T| < q) for the upper quantile q
    low, high = 0.0, 1.0
    while student_t_two_sided_mass(high, dof) < mass:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if student_t_two_sided_mass(middle, dof) < mass:
            low = middle
        else:
            high = middle
        if high - low <= 1e-12 * high:
            break
    return math.copysign((low + high) / 2.0, probability - 0.5)
