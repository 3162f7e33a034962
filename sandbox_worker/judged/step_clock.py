"""Where a judge's verify of one case spends its seconds, step by step, for the worker's record.

Why: verify is most of a judged worker's time on a GPU (the candidate process's CUDA start and compile, the
recorded calls, loading the binaries, the references), and the worker's phases say only "verify". The clock
is the judge's own, so its figures are measured outside the candidate; what the candidate process says of its
own steps is kept apart, under names that say whose word it is. None of these figures decides anything.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

PREFIX = "verify."
MAX_REPORTED_SECONDS = 86_400.0  # a candidate's own figure above a day is not a figure


class StepClock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def metrics(self) -> dict[str, float]:
        """`verify.<step>_seconds` for the case's metrics."""
        return {f"{PREFIX}{name}_seconds": round(value, 4) for name, value in self.seconds.items()}


def candidate_reported(timings: Any) -> dict[str, float]:
    """The candidate process's own account of a recorded call (`candidate.on_record`), as
    `candidate_<step>` seconds; anything that is not a plain, finite, plausible number is left out."""
    if not isinstance(timings, Mapping):
        return {}
    kept: dict[str, float] = {}
    for name in ("cuda", "warm_call", "recorded_call"):
        value = timings.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and 0.0 <= value <= MAX_REPORTED_SECONDS:
            kept[f"candidate_{name}"] = float(value)
    return kept
