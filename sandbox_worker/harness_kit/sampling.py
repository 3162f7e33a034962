"""Adaptive sampling: take timed samples until the mean is known well enough, the budget is spent, or
the cap is reached.

At least `min_samples` samples are taken (the orchestrator's lower bound, `repetitions`); then sampling
stops when the relative standard error of the mean is under `target_rse` (nvbench's 0.5 % by default
in `timing.measure`) or `budget_seconds` of sampling is spent, and never goes past `max_samples`.
Warm-up is time-based and runs the very same sampler as the timed samples. Pure apart from the clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

StopReason = Literal["rse", "budget", "max_samples"]

MIN_SAMPLES_FOR_RSE = 5  # the standard error of 2-4 samples says little; never stop on it earlier


@dataclass
class RunningStats:
    """Mean and variance updated one sample at a time (Welford), so checking the stop rule after
    every sample stays O(1) even at 10,000 samples."""

    n: int = 0
    mean: float = 0.0
    _m2: float = 0.0

    def add(self, value: float) -> None:
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self._m2 += delta * (value - self.mean)

    @property
    def stdev(self) -> float:
        return math.sqrt(self._m2 / (self.n - 1)) if self.n > 1 else math.inf

    @property
    def rse(self) -> float:
        """Relative standard error of the mean: stdev / sqrt(n) / mean (inf while undefined)."""
        if self.n < 2 or self.mean <= 0:
            return math.inf
        return self.stdev / math.sqrt(self.n) / self.mean


def stop_reason(
    stats: RunningStats,
    elapsed_seconds: float,
    *,
    min_samples: int,
    max_samples: int,
    target_rse: float,
    budget_seconds: float,
) -> StopReason | None:
    """Why sampling should stop now, or None to take another sample.

    `min_samples` wins over everything: it is the orchestrator's lower bound, and a fixed minimum is
    what defeats a candidate that behaves differently once it thinks timing has started.
    """
    if stats.n < min_samples:
        return None
    if stats.n >= max_samples:
        return "max_samples"
    if stats.n >= MIN_SAMPLES_FOR_RSE and stats.rse < target_rse:
        return "rse"
    if elapsed_seconds >= budget_seconds:
        return "budget"
    return None


@dataclass
class SamplingLimits:
    min_samples: int
    max_samples: int
    target_rse: float
    budget_seconds: float
    warmup_seconds: float
    settle_seconds: float = 0.0


Sampler = Callable[[], tuple[float, Any]]  # one timed call -> (microseconds, the call's output)


def warm_up(take_sample: Sampler, *, warmup_seconds: float, min_calls: int, max_calls: int) -> list[float]:
    """Run the timed loop, untimed, for `warmup_seconds` (at least `min_calls`); returns its samples.

    Time-based like do_bench (25 ms by default) so slow kernels are not warmed up for minutes and fast
    ones get hundreds of calls to settle clocks, caches and autotuners.
    """
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < max_calls and (
        len(samples) < min_calls or time.perf_counter() - started < warmup_seconds
    ):
        samples.append(take_sample()[0])
    return samples


def collect(
    take_sample: Sampler, limits: SamplingLimits
) -> tuple[list[float], Any, StopReason, RunningStats]:
    """Take samples until `stop_reason` says stop; returns (samples_us, last output, reason, stats)."""
    samples: list[float] = []
    stats = RunningStats()
    output: Any = None
    started = time.perf_counter()
    while True:
        sample_us, output = take_sample()
        samples.append(sample_us)
        stats.add(sample_us)
        reason = stop_reason(
            stats,
            time.perf_counter() - started,
            min_samples=limits.min_samples,
            max_samples=limits.max_samples,
            target_rse=limits.target_rse,
            budget_seconds=limits.budget_seconds,
        )
        if reason is not None:
            return samples, output, reason, stats
