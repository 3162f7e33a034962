"""The measured bottleneck of a kernel: which limiter (launch, memory, compute, occupancy, ...) its costliest
case hits, from the median and the NCU summary, with the numbers that say so.

A pure function of an `Evaluation`, shared by the prompt (orchestrator/providers/prompt.py) and the
offline tuner (orchestrator/providers/tune/), so both read the same evidence the same way.
"""

from __future__ import annotations

import math
from typing import Any

from protocol.results import CaseMeasurement, Evaluation

BOTTLENECK_CLASSES = ("launch", "memory", "compute", "occupancy", "synchronization", "spill", "unknown")
LAUNCH_BOUND_MEDIAN_US = 10.0
SATURATED_PCT = 60.0
UNDERUSED_PCT = 40.0
LOW_OCCUPANCY_PCT = 25.0
NCU_FIELDS = (
    "duration_us",
    "sm_throughput_pct",
    "dram_throughput_pct",
    "memory_throughput_pct",
    "achieved_occupancy_pct",
    "registers_per_thread",
    "local_load_bytes",
    "local_store_bytes",
)


def finite_number(value: Any) -> float | None:
    """The value as a float when it is a real, finite number (bool, NaN and infinity are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def ncu_summary(case: CaseMeasurement) -> dict[str, float]:
    """The numeric NCU summary fields of one case; unsupported (null) counters are simply absent."""
    profile = case.profile if isinstance(case.profile, dict) else {}
    ncu = profile.get("ncu")
    if isinstance(ncu, dict) and isinstance(ncu.get("summary"), dict):
        ncu = ncu["summary"]
    if not isinstance(ncu, dict):
        return {}
    summary: dict[str, float] = {}
    for name in NCU_FIELDS:
        number = finite_number(ncu.get(name))
        if number is not None:
            summary[name] = number
    return summary


def format_number(value: float) -> str:
    """Four significant digits: what prompts and evidence lines show of a measurement."""
    return f"{value:.4g}"


def _dominant_case(evaluation: Evaluation) -> CaseMeasurement | None:
    measured = [case for case in evaluation.cases if case.stats is not None]
    if not measured:
        return None
    return max(measured, key=lambda case: case.stats.median * case.weight)  # type: ignore[union-attr]


def classify_bottleneck(evaluation: Evaluation | None) -> tuple[str, str]:
    """(class, one evidence line with the numbers) for the case that costs the most time.

    Rules, first match wins: median < 10 µs -> launch; no NCU summary -> unknown; local-memory bytes > 0 ->
    spill; DRAM/memory throughput >= 60 % -> memory; SM throughput >= 60 % -> compute; achieved occupancy
    < 25 % -> occupancy; SM and memory throughput both < 40 % -> synchronization (low compute and memory
    utilization together mean scheduling, serialization or too little parallelism); else unknown.
    """
    if evaluation is None:
        return "unknown", "no incumbent evaluation is available, so no bottleneck is measured"
    case = _dominant_case(evaluation)
    if case is None:
        reason = f" ({evaluation.reason})" if evaluation.reason else ""
        return "unknown", f"evaluation '{evaluation.label}' has no measured case: {evaluation.status.value}{reason}"
    median = case.stats.median  # type: ignore[union-attr]
    head = f"case {case.case_id}: median {format_number(median)} µs"
    if median < LAUNCH_BOUND_MEDIAN_US:
        limit = format_number(LAUNCH_BOUND_MEDIAN_US)
        return "launch", f"{head} < {limit} µs, so launch and wrapper overhead dominate"
    ncu = ncu_summary(case)
    if not ncu:
        return "unknown", f"{head}; no ncu profile for this case, so the bottleneck is not measured"
    labels = {
        "duration_us": ("ncu duration", " µs"),
        "dram_throughput_pct": ("dram", " %"),
        "memory_throughput_pct": ("memory", " %"),
        "sm_throughput_pct": ("sm", " %"),
        "achieved_occupancy_pct": ("occupancy", " %"),
        "registers_per_thread": ("regs", ""),
    }
    numbers = ", ".join(
        f"{label} {format_number(ncu[key])}{unit}" for key, (label, unit) in labels.items() if key in ncu
    )
    local_bytes = ncu.get("local_load_bytes", 0.0) + ncu.get("local_store_bytes", 0.0)
    if local_bytes:
        numbers += f", local memory {format_number(local_bytes)} B"
    observed = f"{head}, {numbers}"
    memory = max(ncu.get("dram_throughput_pct", -1.0), ncu.get("memory_throughput_pct", -1.0))
    compute = ncu.get("sm_throughput_pct", -1.0)
    occupancy = ncu.get("achieved_occupancy_pct")
    if local_bytes > 0:
        return "spill", f"{observed}; register spills reach local memory"
    if memory >= SATURATED_PCT:
        return "memory", f"{observed}; memory throughput is near its peak"
    if compute >= SATURATED_PCT:
        return "compute", f"{observed}; SM throughput is near its peak"
    if occupancy is not None and occupancy < LOW_OCCUPANCY_PCT:
        return "occupancy", f"{observed}; too few warps are resident to hide latency"
    if 0 <= compute < UNDERUSED_PCT and 0 <= memory < UNDERUSED_PCT:
        return "synchronization", f"{observed}; low compute and memory use: serialization or too little parallelism"
    return "unknown", f"{observed}; no single limiter stands out"
