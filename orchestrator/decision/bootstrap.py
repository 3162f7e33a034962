"""Is a candidate's gain over the incumbent larger than the measurement noise?

Each side is timed in a few fresh worker processes (default A/B/A). The dominant noise is between processes
(clocks, thermal: about 0.2 % on the H200) and cannot be seen inside one process's samples, which are also
autocorrelated; a bootstrap of pooled samples would give a far too narrow interval and promote A/A noise. So
the test is a two-level bootstrap of the weighted mean log speedup:
- within a run, a circular block bootstrap of the samples (blocks keep short-range autocorrelation) gives
  the noise of the run's median;
- between runs, each run's log median is shifted by a draw from N(0, noise_floor² + the observed variance of
  the run medians of the same side, e.g. A before vs A after). With one to three runs a side, resampling
  runs is degenerate; the floor keeps one run per side from looking noise-free, and the observed spread
  widens the interval when the incumbent disagrees with itself. A run's shift is shared by all its cases:
  drift is process-wide and does not average out over cases.
  Once the run has learnt the between-run sd from repeated sources (`learned_sd`, pooled and t-inflated by
  `orchestrator.decision.noise.noise_from_history`), the shift is drawn from N(0, max(noise_floor, learned_sd)²) instead,
  scaled per case by that case's own learnt sd where it has one (`learned_sd_by_case`): one standard-normal
  draw per run, shared, so the cases drift together but each by its own amount.
The bootstrap gives the shape of the noise, the point estimate its centre; the lower bound is the
(1 - confidence) quantile and the gain is above noise when it exceeds 1.0. On simulated H200 noise (drift
0.2 %, CV 1 %, A/B/A, 5000 trials) A/A was above noise in 0.5 % of trials (promoted at 1.01: 0.1 %), a 2 % gain
was promoted in 97 %, 3 % always (tests/test_promotion.py). The floor must cover the real drift: at 0.3 % drift
A/A rose to 1.7 % above noise (0.7 % promoted); with A/B only, to 1.3 % (0.4 %).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from orchestrator.decision.statistics import geometric_mean, weighted_geomean
from protocol.base import StrictModel

# Resample indices held in memory at once by the within-run bootstrap (keeps long runs bounded).
BOOTSTRAP_CHUNK_ELEMENTS = 2_000_000


class CasePromotion(StrictModel):
    """One case's share of the test; bounds are at the test's confidence, like the aggregate's."""

    speedup: float
    lower: float
    upper: float
    incumbent_run_medians: list[float]
    candidate_run_medians: list[float]
    # Observed relative spread (std-dev of log run medians, pooled over sides with >= 2 runs); 0.0 when
    # no side has two runs to compare.
    between_run_spread: float


class PromotionTest(StrictModel):
    """Persisted per experiment: enough to audit the decision, no raw resamples."""

    point_speedup: float
    lower_bound: float  # one-sided lower bound at `confidence`: the test statistic
    upper_bound: float  # one-sided upper bound at `confidence`; [lower, upper] is a 2*confidence-1 interval
    confidence: float
    min_speedup: float
    per_case: dict[str, CasePromotion]
    noise_estimate: float  # bootstrap std-dev of the aggregate log speedup (relative noise of the estimate)
    method: str
    seed: int | None = None  # the bootstrap's seed (also named at the end of `method`)
    passes_noise: bool
    passes: bool
    reason: str


def promotion_test(
    candidate: Mapping[str, Sequence[Sequence[float]]],
    incumbent: Mapping[str, Sequence[Sequence[float]]],
    weights: Mapping[str, float],
    min_speedup: float,
    *,
    confidence: float = 0.99,
    resamples: int = 2000,
    seed: int = 0,
    noise_floor: float = 0.002,
    learned_sd: float | None = None,
    learned_sd_by_case: Mapping[str, float] | None = None,
) -> PromotionTest:
    """Test candidate vs incumbent runs (case_id -> one list of samples, in µs, per worker run).

    Without `learned_sd` the between-run sd is hypot(floor, this trial's own run spread); with it (the
    run's pooled estimate of repeated sources, which already holds this trial's repeats) it is
    max(floor, the case's own entry of `learned_sd_by_case`, else `learned_sd`).
    """
    case_ids = _validated_case_ids(candidate, incumbent, weights)
    if not 0.5 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0.5, 1), got {confidence}")
    if resamples < 100:
        raise ValueError(f"resamples must be >= 100 for a tail quantile to mean anything, got {resamples}")
    if not (math.isfinite(noise_floor) and noise_floor >= 0):
        raise ValueError(f"noise_floor must be a finite number >= 0, got {noise_floor}")
    if learned_sd is not None and not (math.isfinite(learned_sd) and learned_sd >= 0):
        raise ValueError(f"learned_sd must be a finite number >= 0, got {learned_sd}")
    by_case = dict(learned_sd_by_case or {}) if learned_sd is not None else {}
    for case_id, sd in by_case.items():
        if not (math.isfinite(sd) and sd >= 0):
            raise ValueError(f"learned_sd_by_case[{case_id!r}] must be a finite number >= 0, got {sd}")
    if not (math.isfinite(min_speedup) and min_speedup > 0):
        raise ValueError(f"min_speedup must be a positive number, got {min_speedup}")

    rng = np.random.default_rng(seed)
    most_incumbent_runs = max(len(incumbent[case_id]) for case_id in case_ids)
    most_candidate_runs = max(len(candidate[case_id]) for case_id in case_ids)
    # One standard-normal drift per worker run, shared by every case measured in that run.
    incumbent_drift = rng.standard_normal((resamples, most_incumbent_runs))
    candidate_drift = rng.standard_normal((resamples, most_candidate_runs))

    total_weight = sum(weights[case_id] for case_id in case_ids)
    aggregate_log_speedups = np.zeros(resamples)
    point_log_speedups: dict[str, float] = {}
    per_case: dict[str, CasePromotion] = {}
    for case_id in case_ids:
        incumbent_runs = [np.asarray(run, dtype=float) for run in incumbent[case_id]]
        candidate_runs = [np.asarray(run, dtype=float) for run in candidate[case_id]]
        incumbent_medians = [float(np.median(run)) for run in incumbent_runs]
        candidate_medians = [float(np.median(run)) for run in candidate_runs]
        incumbent_log_medians = np.log(incumbent_medians)
        candidate_log_medians = np.log(candidate_medians)
        observed_spread = _pooled_log_spread([incumbent_log_medians, candidate_log_medians])
        between_run_sd = (math.hypot(noise_floor, observed_spread) if learned_sd is None
                          else max(noise_floor, by_case.get(case_id, learned_sd)))

        incumbent_level = _bootstrap_side_log_level(
            incumbent_runs, incumbent_drift, between_run_sd, resamples, rng
        )
        candidate_level = _bootstrap_side_log_level(
            candidate_runs, candidate_drift, between_run_sd, resamples, rng
        )
        case_log_speedups = incumbent_level - candidate_level
        aggregate_log_speedups += weights[case_id] / total_weight * case_log_speedups
        point_log_speedups[case_id] = float(incumbent_log_medians.mean() - candidate_log_medians.mean())
        case_lower, case_upper = _bounds(point_log_speedups[case_id], case_log_speedups, confidence)
        per_case[case_id] = CasePromotion(
            speedup=geometric_mean(incumbent_medians) / geometric_mean(candidate_medians),
            lower=case_lower,
            upper=case_upper,
            incumbent_run_medians=incumbent_medians,
            candidate_run_medians=candidate_medians,
            between_run_spread=observed_spread,
        )

    point_speedup = weighted_geomean({c: per_case[c].speedup for c in case_ids}, weights)
    point_log_speedup = sum(weights[c] / total_weight * point_log_speedups[c] for c in case_ids)
    lower_bound, upper_bound = _bounds(point_log_speedup, aggregate_log_speedups, confidence)
    noise_estimate = float(aggregate_log_speedups.std())
    passes_noise = lower_bound > 1.0
    passes = passes_noise and point_speedup >= min_speedup
    return PromotionTest(
        seed=seed,
        point_speedup=point_speedup,
        lower_bound=lower_bound,
        upper_bound=upper_bound,
        confidence=confidence,
        min_speedup=min_speedup,
        per_case=per_case,
        noise_estimate=noise_estimate,
        method=(
            "two-level bootstrap of the weighted log speedup: circular block bootstrap of samples within runs, "
            + (f"per-run log shift N(0, floor^2 + observed run spread^2) shared across cases; floor {noise_floor:.2%}, "
               if learned_sd is None else
               f"per-run log shift N(0, max(floor {noise_floor:.2%}, learned {learned_sd:.2%})^2) shared across cases, "
               if not by_case else
               "per-run log shift shared across cases, N(0, max(floor, the case's learned sd)^2): "
               + ", ".join(f"{c} {max(noise_floor, by_case.get(c, learned_sd)):.2%}" for c in case_ids) + "; ")
            + f"{resamples} resamples, seed {seed}"
        ),
        passes_noise=passes_noise,
        passes=passes,
        reason=_reason(point_speedup, lower_bound, noise_estimate, confidence, min_speedup, passes_noise),
    )


def _validated_case_ids(
    candidate: Mapping[str, Sequence[Sequence[float]]],
    incumbent: Mapping[str, Sequence[Sequence[float]]],
    weights: Mapping[str, float],
) -> list[str]:
    """Sorted so the random stream, hence the result, does not depend on mapping order."""
    if not candidate:
        raise ValueError("no cases to compare")
    if set(candidate) != set(incumbent):
        raise ValueError(
            f"candidate and incumbent cases differ: only candidate {sorted(set(candidate) - set(incumbent))}, "
            f"only incumbent {sorted(set(incumbent) - set(candidate))}"
        )
    case_ids = sorted(candidate)
    for case_id in case_ids:
        weight = weights.get(case_id)
        if weight is None or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"case {case_id!r} needs a finite weight >= 0, got {weight}")
        for side, runs in (("candidate", candidate[case_id]), ("incumbent", incumbent[case_id])):
            if not runs:
                raise ValueError(f"case {case_id!r}: {side} has no runs")
            for index, run in enumerate(runs):
                if len(run) == 0:
                    raise ValueError(f"case {case_id!r}: {side} run {index} has no samples")
                if not all(math.isfinite(s) and s > 0 for s in run):
                    raise ValueError(
                        f"case {case_id!r}: {side} run {index} has a sample that is not a positive number"
                    )
    if sum(weights[case_id] for case_id in case_ids) <= 0:
        raise ValueError("the case weights sum to 0")
    return case_ids


def _pooled_log_spread(sides_log_medians: Sequence[np.ndarray]) -> float:
    """Pooled std-dev of run log medians around each side's own mean: the between-run noise actually seen."""
    squared_deviations = 0.0
    degrees_of_freedom = 0
    for log_medians in sides_log_medians:
        if len(log_medians) >= 2:
            squared_deviations += float(((log_medians - log_medians.mean()) ** 2).sum())
            degrees_of_freedom += len(log_medians) - 1
    return math.sqrt(squared_deviations / degrees_of_freedom) if degrees_of_freedom else 0.0


def _bootstrap_side_log_level(
    runs: Sequence[np.ndarray],
    drift: np.ndarray,
    between_run_sd: float,
    resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Resampled mean over runs of (log median of block-resampled samples + this run's drift)."""
    level = np.zeros(resamples)
    for index, run in enumerate(runs):
        level += np.log(_block_bootstrap_medians(run, resamples, rng)) + between_run_sd * drift[:, index]
    return level / len(runs)


def _block_bootstrap_medians(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Circular block bootstrap of the median; block length n^(1/3) (samples assumed in time order)."""
    count = len(samples)
    block_length = max(1, round(count ** (1 / 3)))
    blocks_per_resample = -(-count // block_length)
    offsets = np.arange(block_length)
    chunk = max(1, BOOTSTRAP_CHUNK_ELEMENTS // (blocks_per_resample * block_length))
    medians = np.empty(resamples)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        block_starts = rng.integers(0, count, size=(stop - start, blocks_per_resample))
        indices = ((block_starts[:, :, None] + offsets) % count).reshape(stop - start, -1)[:, :count]
        medians[start:stop] = np.median(samples[indices], axis=1)
    return medians


def _bounds(point_log: float, bootstrap_logs: np.ndarray, confidence: float) -> tuple[float, float]:
    """One-sided bounds at `confidence`: bootstrap deviations from their own centre, placed on the point."""
    deviations = bootstrap_logs - bootstrap_logs.mean()
    low, high = np.quantile(deviations, [1.0 - confidence, confidence])
    return float(math.exp(point_log + low)), float(math.exp(point_log + high))


def _reason(
    point_speedup: float,
    lower_bound: float,
    noise_estimate: float,
    confidence: float,
    min_speedup: float,
    passes_noise: bool,
) -> str:
    level = f"{confidence * 100:g}%"
    noise = f"(noise {noise_estimate:.2%})"
    if not passes_noise:
        return f"speedup {point_speedup:.4f}x, {level} lower bound {lower_bound:.4f}x <= 1.0: within noise {noise}"
    if point_speedup < min_speedup:
        return (
            f"speedup {point_speedup:.4f}x < min {min_speedup:.4f}x, "
            f"though {level} lower bound {lower_bound:.4f}x > 1.0 {noise}"
        )
    return f"speedup {point_speedup:.4f}x, {level} lower bound {lower_bound:.4f}x > 1.0 {noise}"
