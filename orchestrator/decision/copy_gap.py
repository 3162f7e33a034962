"""Why a memory-bound case ends short of the copy ceiling the run measured: the limit, named from the case's size,
its launch and its own NCU summary, so a report that stops below the ceiling says what stops it.

A case is memory-bound when the harness states the bytes it must move and its arithmetic per byte is below the
device's ridge (dense FLOP peak over memory peak). Below `COPY_TARGET_PERCENT` of the copy ceiling the first limit
that applies is named, each with the numbers that show it:

- size: the ceiling would move the case's bytes in under `SHORT_COPY_US`; a kernel's fixed start, ramp and drain
  (microseconds) are then a large share of its time, whatever its configuration;
- grid: fewer programs than the device has SMs, so some SMs move nothing (the launch grid, not a block size,
  caps it);
- spills: registers spilled to local memory, traffic the copy does not have;
- occupancy: under `LOW_OCCUPANCY_PCT` of an SM's warps active, too few loads in flight, with what caps it
  where NCU says (registers, shared memory, warps per block, blocks per SM) and the warps per program;
- small programs: each program moves under `SMALL_PROGRAM_BYTES` (one short row): it ends before its loads
  overlap.

Otherwise the NCU figures are given as they are, and a case without an NCU profile says so. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.decision.physics import CaseRate, evaluation_rates
from orchestrator.decision.profile_rules import number
from protocol.devices import DevicePeaks, peaks_for
from protocol.results import Evaluation

COPY_TARGET_PERCENT = 85.0
SHORT_COPY_US = 10.0
LOW_OCCUPANCY_PCT = 60.0  # fewer warps in flight than a streaming kernel needs to cover memory latency
SMALL_PROGRAM_BYTES = 32 * 1024
OCCUPANCY_LIMITS = (("occupancy_limit_registers", "its registers"),
                    ("occupancy_limit_shared_mem", "its shared memory"),
                    ("occupancy_limit_warps", "its warps per block"),
                    ("occupancy_limit_blocks", "the SM's block limit"))


def memory_bound(rate: CaseRate, peaks: DevicePeaks | None) -> bool:
    """Whether a case's stated work is below the device's ridge for its arithmetic (memory is its floor)."""
    if not rate.bytes:
        return False
    if not rate.flops or peaks is None:
        return True
    return rate.flops / rate.bytes < peaks.flop_per_s_for(rate.flop_dtype) / peaks.memory_bytes_per_s


def copy_gap(rate: CaseRate, peaks: DevicePeaks | None, ncu: Mapping[str, Any] | None) -> str | None:
    """What keeps the case below `COPY_TARGET_PERCENT` of the copy ceiling, or None when it reaches it, is not
    memory-bound, or has no ceiling to be read against. `ncu`: the case's normalized NCU summary (profile["ncu"])."""
    percent, bytes_moved = rate.percent_of_copy_ceiling, rate.bytes
    if percent is None or percent >= COPY_TARGET_PERCENT or not bytes_moved or not memory_bound(rate, peaks):
        return None
    head = f"{percent:.0f} % of the copy ceiling"
    ideal_us = rate.median_us * percent / 100.0  # the copy ceiling's time for the same bytes
    if ideal_us < SHORT_COPY_US:
        return (f"{head}: size: the ceiling moves its {bytes_moved / 1e6:.1f} MB in {ideal_us:.1f} µs, so a "
                "kernel's fixed start, ramp and drain are a large share of its time")
    figures = ncu_figures(ncu)
    if figures.get("duration_us") is None:
        return f"{head}: no NCU profile of this case to say which limit stops it"
    grid, sms = figures.get("grid_size"), peaks.multiprocessors if peaks else None
    if grid and sms and grid < sms:
        return f"{head}: grid: {grid:.0f} programs for {sms} SMs, so {sms - grid:.0f} SMs move nothing"
    spilled = (figures.get("local_load_bytes") or 0.0) + (figures.get("local_store_bytes") or 0.0)
    if spilled > 0:
        return (f"{head}: spills: {spilled / 1e6:.2f} MB of local-memory traffic from registers spilled at "
                f"{figures.get('registers_per_thread') or 0:.0f} registers per thread")
    occupancy = figures.get("achieved_occupancy_pct")
    if occupancy is not None and occupancy < LOW_OCCUPANCY_PCT:
        return f"{head}: occupancy: {occupancy:.0f} % of the warps an SM holds were active{_occupancy_cap(figures)}"
    if grid and bytes_moved / grid < SMALL_PROGRAM_BYTES:
        return (f"{head}: small programs: each of its {grid:.0f} programs moves "
                f"{bytes_moved / grid / 1024:.1f} KiB, too little to keep loads in flight before it ends")
    shown = ", ".join(f"{label} {figures[key]:.0f} %" for key, label in (
        ("dram_throughput_pct", "DRAM throughput"), ("sm_throughput_pct", "SM throughput"),
        ("achieved_occupancy_pct", "occupancy")) if figures.get(key) is not None)
    return f"{head}: no single limit in its NCU summary ({shown or 'no throughput figures'})"


def copy_gaps(evaluation: Evaluation, device: str | None = None,
              rates: Sequence[CaseRate] | None = None) -> dict[str, str | None]:
    """Case id -> what keeps each benchmarked case of `evaluation` below the copy ceiling (None where nothing
    does), read from its own NCU profile against the peaks of `device` (default: the one its worker reported).
    `rates`: the evaluation's rates on that device where the caller has them already."""
    peaks = peaks_for(device or evaluation.worker.device)
    gaps: dict[str, str | None] = {}
    for rate in rates if rates is not None else evaluation_rates(evaluation, device):
        measured = evaluation.case(rate.case_id)
        ncu = (measured.profile or {}).get("ncu") if measured is not None else None
        gaps[rate.case_id] = copy_gap(rate, peaks, ncu if isinstance(ncu, Mapping) else None)
    return gaps


def ncu_figures(ncu: Mapping[str, Any] | None) -> dict[str, float | None]:
    """The numeric fields of a normalized NCU profile: its summary, its deep fields and its stall shares."""
    figures: dict[str, float | None] = {}
    for part in ("summary", "deep", "stalls"):
        block = (ncu or {}).get(part)
        if isinstance(block, Mapping):
            figures.update({key: number(value) for key, value in block.items()})
    return figures


def _occupancy_cap(figures: Mapping[str, float | None]) -> str:
    """What caps the warps resident per SM, where NCU says: the theoretical bound, the smallest of its launch
    limits, the warps per program, and how much of the time warps waited on memory."""
    limits = [(value, label) for key, label in OCCUPANCY_LIMITS if (value := figures.get(key)) is not None]
    theoretical, registers = figures.get("theoretical_occupancy_pct"), figures.get("registers_per_thread")
    block, waiting = figures.get("block_size"), figures.get("long_scoreboard_pct")
    parts = []
    if theoretical is not None:
        parts.append(f"at most {theoretical:.0f} % possible")
    if limits:
        least = min(value for value, _ in limits)
        parts.append(f"at most {least:.0f} blocks per SM ({', '.join(label for value, label in limits if value == least)})")
    elif registers is not None:
        parts.append(f"{registers:.0f} registers per thread")
    if block:
        parts.append(f"{block / 32:.0f} warp(s) per program")
    if waiting is not None:
        parts.append(f"warps waited on memory {waiting:.0f} % of the time")
    return f" ({'; '.join(parts)})" if parts else ""
