"""Kernel timing for harness `benchmark` functions: raw per-call samples in microseconds.

Why not `triton.testing.do_bench`: it returns a summary (not raw samples), its CUDA-graph variant has
no L2 flush, it does not sync the whole device per call, and it fails on a CPU-only machine. `measure`
times a call in one of three ways:

- "events" (`event_timer`): every timed call is preceded by an L2 flush (a write of at least 2x the
  device's L2) and timed by its own CUDA event pair, then the whole device is synchronized, so calls
  never overlap; work a call hid on a side stream is detected and added back into its samples;
- "cuda_graph" (`graph_timer`): short kernels (under ~20 µs) are dominated by launch latency with
  per-call events, so a sample is the mean of 20 (flush, call) pairs replayed from one CUDA graph, less
  the flushes alone replayed from another;
- "cpu": on a CPU (or with TRITON_INTERPRET=1) each call is timed with `time.perf_counter_ns`.

Every mode samples the same way (`sampling`):
- warm-up is time-based (`warmup_seconds`, at least a few calls) and uses the very same loop as the
  timed samples, so a candidate that detects warm-up gains nothing. The first measurement on a device in
  a process warms for at least `settle_seconds` (0.5 s): on the H200 an idle GPU sits at 345 MHz, and
  after idling a 1.4 ms matmul ran 3.6 % slow in its first 100 ms of load (within 0.16 % after that); in
  the measurement study each process's first runs were about 1 % slower than its later ones. Every
  evaluation is a fresh worker that has just compiled, so without it every run would be timed on that
  ramp and its run-to-run scatter would be the noise the promotion test has to beat (docs/results/2026-11-30-measurement-study.md);
- sampling is adaptive: at least `repetitions` samples (the orchestrator's lower bound), then stop when
  the relative standard error of the mean is under `target_rse` (nvbench's 0.5 %) or `budget_seconds`
  of sampling is spent, never more than `max_samples`.

`check_last(output)` is called with the output of the last timed call, so a harness can re-check it
(state drift after the correctness gate); see `checks.last_output_check`. When it is given, the
output of the previous call is poisoned (NaN / sentinel, outside the timed window) before each call,
so a call that silently skips its work leaves poison behind instead of a stale correct answer. That
poisoning breaks kernels that return one of their own inputs (in-place kernels): give those no
`check_last`, re-check them in the harness instead.

Comparisons need one mode on both sides: "auto" decides per callable, so a harness that compares a
candidate with a baseline should pass the mode the baseline got (`metrics["mode"]`), or a fixed one.

Only the standard library is imported at module level; torch is imported inside the CUDA paths.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any, Literal

from sandbox_worker.harness_kit.event_timer import (
    FALLBACK_FLUSH_BYTES,
    FENCE_CALIBRATION_CALLS,
    FLUSH_L2_MULTIPLE,
    HOST_COVER_CYCLES,
    STREAM_ESCAPE_MIN_FRACTION,
    STREAM_ESCAPE_MIN_US,
    EventTimer,
    flush_bytes_for,
)
from sandbox_worker.harness_kit.event_timer import stream_escape as _stream_escape
from sandbox_worker.harness_kit.graph_timer import GRAPH_UNROLL, WARMUP_SIDE_STREAM_CALLS, GraphTimer
from sandbox_worker.harness_kit.poison import PoisoningCaller
from sandbox_worker.harness_kit.sampling import (
    MIN_SAMPLES_FOR_RSE,
    RunningStats,
    Sampler,
    SamplingLimits,
    StopReason,
    collect,
    stop_reason,
    warm_up,
)

__all__ = [
    "CACHE_POLICY_CPU",
    "CACHE_POLICY_CUDA_GRAPH",
    "CACHE_POLICY_EVENTS",
    "FALLBACK_FLUSH_BYTES",
    "FENCE_CALIBRATION_CALLS",
    "FLUSH_L2_MULTIPLE",
    "GRAPH_THRESHOLD_US",
    "GRAPH_UNROLL",
    "HOST_COVER_CYCLES",
    "MIN_SAMPLES_FOR_RSE",
    "MIN_WARMUP_CALLS_CPU",
    "MIN_WARMUP_CALLS_CUDA",
    "SETTLE_SECONDS",
    "STREAM_ESCAPE_MIN_FRACTION",
    "STREAM_ESCAPE_MIN_US",
    "WARMUP_SIDE_STREAM_CALLS",
    "Mode",
    "RunningStats",
    "Sampler",
    "SamplingLimits",
    "StopReason",
    "collect",
    "cuda_available",
    "flush_bytes_for",
    "measure",
    "stop_reason",
    "triton_interpreter_active",
    "warm_up",
]

# Captured when the harness kit is imported (before any candidate), so a candidate that reassigns
# `time.perf_counter_ns` later does not change what the CPU path reads. A speed bump, not a wall.
_now_ns = time.perf_counter_ns

Mode = Literal["auto", "events", "cuda_graph", "cpu"]

CACHE_POLICY_EVENTS = "l2_flush_2x_events"
CACHE_POLICY_CUDA_GRAPH = "l2_flush_cuda_graph"
CACHE_POLICY_CPU = "cpu_perf_counter"

SETTLE_SECONDS = 0.5  # first measurement per device per process: see the module doc
GRAPH_THRESHOLD_US = 20.0  # "auto" uses CUDA graphs for calls shorter than this
MIN_WARMUP_CALLS_CPU = 1  # an interpreted Triton call can take a second: one warm-up call compiles it
MIN_WARMUP_CALLS_CUDA = 3  # also the probe that "auto" reads


def cuda_available() -> bool:
    """True when torch is importable and sees a CUDA device (False without torch, never raises)."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - a worker without torch times on the CPU
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken driver means no CUDA timing
        return False


def triton_interpreter_active() -> bool:
    """TRITON_INTERPRET=1 runs kernels on the host: only CPU timing makes sense then."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")


# Devices that have had their settle warm-up in this process (a worker process is one evaluation).
_settled_devices: set[int] = set()


# ---- the entry point -----------------------------------------------------------------------------


def measure(
    fn: Callable[[], Any],
    *,
    repetitions: int,
    device: str | None = None,
    mode: Mode = "auto",
    warmup_seconds: float = 0.025,
    settle_seconds: float = SETTLE_SECONDS,
    budget_seconds: float = 2.0,
    max_samples: int = 10_000,
    target_rse: float = 0.005,
    check_last: Callable[[Any], None] | None = None,
) -> dict:
    """Time `fn()` (one kernel call, inputs bound) and return the benchmark contract dict.

    `{"samples_us": [...], "warmup_count": int, "cache_policy": str, "metrics": {"rse", "mode",
    "flush_bytes", "stopped_by", ...}}`. `repetitions` is a lower bound on the number of samples;
    `budget_seconds` bounds the sampling time once that many are taken; the first CUDA measurement on a
    device in this process warms up for at least `settle_seconds`. "auto" picks "cpu" on a CPU
    device or under TRITON_INTERPRET=1, else "cuda_graph" when a warm call takes under ~20 µs, else
    "events". `check_last` may raise to reject the run (its exception propagates).
    """
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    limits = SamplingLimits(
        min_samples=repetitions,
        max_samples=max(max_samples, repetitions),
        target_rse=target_rse,
        budget_seconds=budget_seconds,
        warmup_seconds=warmup_seconds,
        settle_seconds=settle_seconds,
    )
    if mode not in ("auto", "events", "cuda_graph", "cpu"):
        raise ValueError(f"unknown timing mode {mode!r}")
    on_cpu = _resolves_to_cpu(device)
    if mode == "cpu" or (mode == "auto" and on_cpu):
        sync_device = None if on_cpu else (device or "cuda")
        return _measure_cpu(fn, limits, sync_device=sync_device, check_last=check_last)
    if on_cpu:
        interpret = os.environ.get("TRITON_INTERPRET")
        raise ValueError(
            f"mode {mode!r} needs a CUDA device (device={device!r}, TRITON_INTERPRET={interpret!r})"
        )
    return _measure_cuda(fn, limits, device=device, mode=mode, check_last=check_last)


def _resolves_to_cpu(device: str | None) -> bool:
    if triton_interpreter_active():
        return True
    if device is None:
        return not cuda_available()
    return str(device).split(":")[0] == "cpu"


def _result(
    samples: list[float],
    *,
    warmup_count: int,
    cache_policy: str,
    stats: RunningStats,
    mode: str,
    flush_bytes: int | None,
    stopped_by: StopReason,
    extra: dict[str, Any] | None = None,
) -> dict:
    metrics: dict[str, Any] = {
        "rse": stats.rse,
        "mode": mode,
        "flush_bytes": flush_bytes,
        "stopped_by": stopped_by,
    }
    metrics.update(extra or {})
    return {
        "samples_us": samples,
        "warmup_count": warmup_count,
        "cache_policy": cache_policy,
        "metrics": metrics,
    }


# ---- CPU ------------------------------------------------------------------------------------------


def _measure_cpu(
    fn: Callable[[], Any],
    limits: SamplingLimits,
    *,
    sync_device: str | None,
    check_last: Callable[[Any], None] | None,
) -> dict:
    """perf_counter_ns around each call; with a CUDA `sync_device` (explicit mode="cpu" on a GPU) the
    device is synchronized inside the window so asynchronous launches do not look like fast kernels."""
    synchronize = _device_synchronizer(sync_device)
    call = PoisoningCaller(fn, enabled=check_last is not None)

    def take_sample() -> tuple[float, Any]:
        call.poison_previous()
        synchronize()
        started = _now_ns()
        output = call()
        synchronize()
        elapsed_ns = _now_ns() - started
        return max(elapsed_ns, 1) / 1000.0, output

    warmup = warm_up(
        take_sample,
        warmup_seconds=limits.warmup_seconds,
        min_calls=MIN_WARMUP_CALLS_CPU,
        max_calls=limits.max_samples,
    )
    samples, output, reason, stats = collect(take_sample, limits)
    if check_last is not None:
        check_last(output)
    return _result(
        samples,
        warmup_count=len(warmup),
        cache_policy=CACHE_POLICY_CPU,
        stats=stats,
        mode="cpu",
        flush_bytes=None,
        stopped_by=reason,
    )


def _device_synchronizer(device: str | None) -> Callable[[], None]:
    if device is None:
        return lambda: None
    import torch

    target = torch.device(device)
    return lambda: torch.cuda.synchronize(target)


# ---- CUDA -----------------------------------------------------------------------------------------


def _cuda_device(device: str | None) -> Any:
    import torch

    target = torch.device(device if device is not None else "cuda")
    if target.type != "cuda":
        raise ValueError(f"CUDA timing needs a CUDA device, got {target}")
    return torch.device("cuda", target.index if target.index is not None else torch.cuda.current_device())


def _measure_cuda(
    fn: Callable[[], Any],
    limits: SamplingLimits,
    *,
    device: str | None,
    mode: str,
    check_last: Callable[[Any], None] | None,
) -> dict:
    import torch

    target = _cuda_device(device)
    with torch.cuda.device(target):
        flush_bytes = flush_bytes_for(target)
        flush_buffer = torch.empty(flush_bytes // 4, dtype=torch.int32, device=target)
        events = EventTimer(fn, flush_buffer, target, poison_outputs=check_last is not None)
        extra: dict[str, Any] = {}
        first_on_device = target.index not in _settled_devices
        warmup_seconds = max(limits.warmup_seconds, limits.settle_seconds if first_on_device else 0.0)
        started = time.perf_counter()
        warmup = warm_up(
            events.take_sample,
            warmup_seconds=warmup_seconds,
            min_calls=MIN_WARMUP_CALLS_CUDA,
            max_calls=limits.max_samples,
        )
        _settled_devices.add(target.index)
        extra["warmup_seconds"] = round(time.perf_counter() - started, 4)
        if mode == "auto":
            probe_us = statistics.median(warmup[-MIN_WARMUP_CALLS_CUDA:])
            extra["probe_us"] = probe_us
            mode = "cuda_graph" if probe_us < GRAPH_THRESHOLD_US else "events"
        if mode == "cuda_graph":
            try:
                graph = GraphTimer(fn, flush_buffer, target, poison_outputs=check_last is not None)
            except Exception as exc:  # noqa: BLE001 - capture failures are the candidate's, reported below
                if "probe_us" not in extra:  # the caller asked for graphs explicitly: no silent fallback
                    raise RuntimeError(f"CUDA graph capture failed: {exc}") from exc
                extra["cuda_graph_error"] = f"{type(exc).__name__}: {exc}"[:300]
                mode = "events"
            else:
                graph_warmup = warm_up(
                    graph.take_sample,
                    warmup_seconds=limits.warmup_seconds,
                    min_calls=MIN_WARMUP_CALLS_CUDA,
                    max_calls=limits.max_samples,
                )
                samples, output, reason, stats = collect(graph.take_sample, limits)
                if check_last is not None:
                    check_last(output)
                return _result(
                    samples,
                    warmup_count=len(warmup) + WARMUP_SIDE_STREAM_CALLS + GRAPH_UNROLL * len(graph_warmup),
                    cache_policy=CACHE_POLICY_CUDA_GRAPH,
                    stats=stats,
                    mode="cuda_graph",
                    flush_bytes=flush_bytes,
                    stopped_by=reason,
                    extra=extra,
                )
        calibration = events.calibrate_drain()
        samples, output, reason, stats = collect(events.take_sample, limits)
        samples, escape = _stream_escape(samples, events.drains[-len(samples) :], calibration)
        if escape["stream_escape_detected"]:
            stats = RunningStats()
            for sample in samples:
                stats.add(sample)
        extra.update(escape)
        if check_last is not None:
            check_last(output)
        return _result(
            samples,
            warmup_count=len(warmup),
            cache_policy=CACHE_POLICY_EVENTS,
            stats=stats,
            mode="events",
            flush_bytes=flush_bytes,
            stopped_by=reason,
            extra=extra,
        )
