"""Kernel timing for harness `benchmark` functions: raw per-call samples in microseconds.

Why not `triton.testing.do_bench`: it returns a summary (not raw samples), its CUDA-graph variant has
no L2 flush, it does not sync the whole device per call, and it fails on a CPU-only machine. The rules
here follow `reference/peers.md` §3a and §4:

- every timed call is preceded by an L2 flush: a write of a buffer at least 2x the device's L2
  (`get_device_properties().L2_cache_size`), so no call profits from data left by the previous one;
- one CUDA event pair per call, then `torch.cuda.synchronize()` (the whole device) before the events
  are read, so calls never overlap (batch-and-skip, #8) and work left on another stream is drained;
  a "fence" event recorded right after that synchronize shows how long the drain took, and a drain
  clearly longer than a calibrated honest one means the call hid work on a side stream (#1): the
  samples then include that work (see `_stream_escape`);
- warm-up is time-based (`warmup_seconds`, at least a few calls) and uses the very same loop as the
  timed samples, so "warm-up detection" (#7) gains nothing. The first measurement on a device in a
  process warms for at least `settle_seconds` (0.5 s): on the H200 an idle GPU sits at 345 MHz, and after
  idling a 1.4 ms matmul ran 3.6 % slow in its first 100 ms of load (within 0.16 % after that); in the
  measurement study each process's first runs were about 1 % slower than its later ones. Every
  evaluation is a fresh worker that has just compiled, so without it every run would be timed on that
  ramp and its run-to-run scatter would be the noise the promotion test has to beat (docs/measurement.md);
- sampling is adaptive: at least `repetitions` samples (the orchestrator's lower bound), then stop when
  the relative standard error of the mean is under `target_rse` (nvbench's 0.5 %) or `budget_seconds`
  of sampling is spent, never more than `max_samples`;
- short kernels (under ~20 µs) are dominated by launch latency with per-call events, so
  "cuda_graph" mode captures K = 20 unrolled (flush, call) pairs in one CUDA graph and K flushes
  alone in another, replays both back to back between three events, and takes
  (pairs - flushes) / K as one sample. The graph-launch latency is in both terms and cancels, the
  flush still precedes every call, and averaging K calls tames the flush's own noise that the
  subtraction adds. An untimed replay of the flushes graph runs first, so both timed graphs run on
  a GPU that is already busy (this cut the run-to-run CV of a 2^16 add from 2.5 % to 0.9 %). We
  tried "events around each replay of a one-call graph" first: it read 4.1 µs for that add, no
  better than plain events, because the device-side graph-launch latency sits inside the event
  pair. Measured on the H200 (2026-11-30, Triton fp32 vector add, medians of 8 runs of
  `measure`): 2^16 elements: events 4.2 µs (launch-bound, noisy), cuda_graph 2.05 µs (CV 0.9 %)
  with a cold L2, do_bench_cudagraph 1.23 µs with a warm L2; 2^20: 7.5, 5.3 and 2.4 µs; 2^26:
  events 188.8 µs, cuda_graph 186.5 µs (CV 0.03 %), do_bench 189.7 µs. A sample in this mode is a
  mean of K calls, so it scatters less than a single call would; it is clamped to 0.001 µs should
  noise ever make it negative;
- on a CPU (or with TRITON_INTERPRET=1) each call is timed with `time.perf_counter_ns`.

`check_last(output)` is called with the output of the last timed call, so a harness can re-check it
(state drift after the correctness gate, #11); see `checks.last_output_check`. When it is given, the
output of the previous call is poisoned (NaN / sentinel, outside the timed window) before each call,
so a call that silently skips its work leaves poison behind instead of a stale correct answer. That
poisoning breaks kernels that return one of their own inputs (in-place kernels): give those no
`check_last`, re-check them in the harness instead.

Comparisons need one mode on both sides: "auto" decides per callable, so a harness that compares a
candidate with a baseline should pass the mode the baseline got (`metrics["mode"]`), or a fixed one.

Only the standard library is imported at module level; torch is imported inside the CUDA paths.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sandbox_worker.harness_kit.checks import poison_

# Captured when the harness kit is imported (before any candidate), so a candidate that reassigns
# `time.perf_counter_ns` later does not change what the CPU path reads. A speed bump, not a wall.
_now_ns = time.perf_counter_ns

Mode = Literal["auto", "events", "cuda_graph", "cpu"]
StopReason = Literal["rse", "budget", "max_samples"]

CACHE_POLICY_EVENTS = "l2_flush_2x_events"
CACHE_POLICY_CUDA_GRAPH = "l2_flush_cuda_graph"
CACHE_POLICY_CPU = "cpu_perf_counter"

FLUSH_L2_MULTIPLE = 2
HOST_COVER_CYCLES = 100_000  # about 50 µs at the H200's 1.98 GHz: longer than a Python launch
FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024  # what do_bench uses when the L2 size is unknown
SETTLE_SECONDS = 0.5  # first measurement per device per process: see the module doc
GRAPH_THRESHOLD_US = 20.0  # "auto" uses CUDA graphs for calls shorter than this
MIN_SAMPLES_FOR_RSE = 5  # the standard error of 2-4 samples says little; never stop on it earlier
MIN_WARMUP_CALLS_CPU = 1  # an interpreted Triton call can take a second: one warm-up call compiles it
MIN_WARMUP_CALLS_CUDA = 3  # also the probe that "auto" reads
GRAPH_UNROLL = 20  # (flush, call) pairs per graph replay in "cuda_graph" mode
WARMUP_SIDE_STREAM_CALLS = 3  # eager calls on the capture stream before a graph capture (torch docs)
FENCE_CALIBRATION_CALLS = 16
STREAM_ESCAPE_MIN_US = 5.0  # drains this much longer than the calibrated ones count as hidden work
STREAM_ESCAPE_MIN_FRACTION = 0.05  # ... and at least this fraction of the call's time


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


# ---- statistics and the stopping rule (pure) ----------------------------------------------------


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


# Devices that have had their settle warm-up in this process (a worker process is one evaluation).
_settled_devices: set[int] = set()


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


class _PoisoningCaller:
    """Calls `fn`; when enabled, `poison_previous()` poisons the previous call's output (see the
    module doc), so a call that skips its work leaves poison for `check_last` to find."""

    def __init__(self, fn: Callable[[], Any], *, enabled: bool) -> None:
        self._fn = fn
        self._enabled = enabled
        self._previous: Any = None

    def poison_previous(self) -> None:
        if self._previous is not None:
            poison_(self._previous)

    def __call__(self) -> Any:
        output = self._fn()
        if self._enabled:
            self._previous = output
        return output


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
    call = _PoisoningCaller(fn, enabled=check_last is not None)

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


def flush_bytes_for(device: Any) -> int:
    """Bytes written before every timed call: 2x the device's L2 (fallback 256 MiB if unknown)."""
    import torch

    l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    if l2_bytes <= 0:
        return FALLBACK_FLUSH_BYTES
    return FLUSH_L2_MULTIPLE * l2_bytes


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
        events = _EventTimer(fn, flush_buffer, target, poison_outputs=check_last is not None)
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
                graph = _GraphTimer(fn, flush_buffer, target, poison_outputs=check_last is not None)
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


class _EventTimer:
    """One event pair per call on the current stream, with an L2 flush in front and a device-wide
    synchronize plus a fence event behind (the fence measures how long other streams kept the device
    busy after the call's own stream was done)."""

    def __init__(
        self, fn: Callable[[], Any], flush_buffer: Any, device: Any, *, poison_outputs: bool
    ) -> None:
        import torch

        self._torch = torch
        self._call = _PoisoningCaller(fn, enabled=poison_outputs)
        self._flush_buffer = flush_buffer
        self._device = device
        self._flush_value = 0
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._fence = torch.cuda.Event(enable_timing=True)
        self.drains: list[float] = []

    def _cover_host_dispatch(self) -> None:
        """Keep the GPU busy (a ~50 µs spin) while the host enqueues start event, call and end event.

        Without it, a call whose Python dispatch outlasts the flush leaves the GPU idle inside the event
        window, and host jitter becomes 10-20 % sample noise for kernels of tens of µs (seen on the H200).
        """
        sleep = getattr(self._torch.cuda, "_sleep", None)
        if sleep is not None:
            sleep(HOST_COVER_CYCLES)

    def _flush(self) -> None:
        # A changing value, so no layer can skip the write as a no-op.
        self._flush_value = (self._flush_value + 1) & 0x7FFFFFFF
        self._flush_buffer.fill_(self._flush_value)

    def _timed(self, body: Callable[[], Any]) -> tuple[float, float, Any]:
        torch = self._torch
        stream = torch.cuda.current_stream(self._device)
        self._call.poison_previous()
        self._flush()
        self._cover_host_dispatch()
        self._start.record(stream)
        output = body()
        self._end.record(stream)
        torch.cuda.synchronize(self._device)  # the whole device: side streams drain here
        self._fence.record(stream)
        self._fence.synchronize()
        call_us = self._start.elapsed_time(self._end) * 1000.0
        drain_us = self._end.elapsed_time(self._fence) * 1000.0
        return call_us, drain_us, output

    def take_sample(self) -> tuple[float, Any]:
        call_us, drain_us, output = self._timed(self._call)
        self.drains.append(drain_us)
        return max(call_us, 1e-3), output

    def calibrate_drain(self) -> list[float]:
        """Drain times of an honest call: the flush itself, timed by the same sequence."""
        drains = []
        for _ in range(FENCE_CALIBRATION_CALLS):
            drains.append(self._timed(self._flush)[1])
        return drains


def _stream_escape(
    samples: list[float], drains: list[float], calibration: list[float]
) -> tuple[list[float], dict[str, Any]]:
    """Detect work hidden on another stream and, if found, add it back into the samples.

    An honest call's stream is idle when its end event fires, so the device-wide synchronize returns
    at once and the fence follows within a few µs (the calibrated drain). A call that left work on a
    side stream makes the synchronize wait for it: its drain is longer by about that work's duration.
    When the median excess is above max(5 µs, 5 % of the median sample), each sample gets its own
    excess added, so hidden work is paid for instead of being free.
    """
    honest_drain = statistics.median(calibration)
    excess = statistics.median(drains) - honest_drain
    threshold = max(STREAM_ESCAPE_MIN_US, STREAM_ESCAPE_MIN_FRACTION * statistics.median(samples))
    detected = excess > threshold
    if detected:
        samples = [
            sample + max(0.0, drain - honest_drain) for sample, drain in zip(samples, drains, strict=True)
        ]
    return samples, {"stream_escape_us": round(excess, 3), "stream_escape_detected": detected}


class _GraphTimer:
    """K unrolled (flush, call) pairs captured in one CUDA graph and K flushes in another; a sample
    is (time of the pairs replay - time of the flushes replay) / K, both timed back to back."""

    def __init__(
        self, fn: Callable[[], Any], flush_buffer: Any, device: Any, *, poison_outputs: bool
    ) -> None:
        import torch

        self._torch = torch
        self._device = device
        self._poison_outputs = poison_outputs
        self._flushes_graph = self._capture(lambda: self._unrolled(flush_buffer.zero_))
        self._warm_on_side_stream(fn)
        outputs: list[Any] = [None]

        def flush_then_call() -> None:
            flush_buffer.zero_()
            outputs[0] = fn()  # earlier outputs are freed: the graph's pool reuses their memory

        self._pairs_graph = self._capture(lambda: self._unrolled(flush_then_call))
        self._static_output = outputs[0]  # written by the last call of every replay
        torch.cuda.synchronize(device)
        self._start = torch.cuda.Event(enable_timing=True)
        self._middle = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    @staticmethod
    def _unrolled(body: Callable[[], Any]) -> None:
        for _ in range(GRAPH_UNROLL):
            body()

    def _capture(self, body: Callable[[], Any]) -> Any:
        graph = self._torch.cuda.CUDAGraph()
        with self._torch.cuda.graph(graph):
            body()
        return graph

    def _warm_on_side_stream(self, fn: Callable[[], Any]) -> None:
        """torch's recipe: a few eager calls on a side stream before capture, so lazy initialisation
        (allocator pools, library handles) happens outside the graph."""
        torch = self._torch
        side = torch.cuda.Stream(self._device)
        side.wait_stream(torch.cuda.current_stream(self._device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_SIDE_STREAM_CALLS):
                fn()
        torch.cuda.current_stream(self._device).wait_stream(side)
        torch.cuda.synchronize(self._device)

    def take_sample(self) -> tuple[float, Any]:
        torch = self._torch
        stream = torch.cuda.current_stream(self._device)
        if self._poison_outputs:
            # A graph that does not rewrite its outputs (work done once, eagerly, during capture)
            # leaves poison behind for check_last instead of the capture-time answer.
            poison_(self._static_output)
        # Untimed lead-in: the host queues everything below while these flushes run, so the timed
        # graphs start on a busy GPU (no idle-to-busy clock ramp after the last synchronize) and
        # run back to back.
        self._flushes_graph.replay()
        self._start.record(stream)
        self._pairs_graph.replay()
        self._middle.record(stream)
        self._flushes_graph.replay()
        self._end.record(stream)
        torch.cuda.synchronize(self._device)
        pairs_us = self._start.elapsed_time(self._middle) * 1000.0
        flushes_us = self._middle.elapsed_time(self._end) * 1000.0
        return max((pairs_us - flushes_us) / GRAPH_UNROLL, 1e-3), self._static_output
