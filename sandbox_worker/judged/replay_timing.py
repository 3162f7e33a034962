"""Timing the judge's replays: every call fresh, poisoned and maybe checked (`fresh_calls`), in one mode per case.

Two modes, as in the timing kit (`harness_kit/timing.py`), and the mode is never the candidate's choice: the
orchestrator fixes it per case from the first measurement of the run (the untouched kernel), or the case's
`timing_mode` parameter does, and every side of every comparison is timed the same way. Only when no mode is
given ("auto", the run's first measurement) does a probe of warm-up calls choose, and the result says which.

- "events": per call, outside the window: a fresh input set, the record bound to it, wrapper buffers and
  outputs poisoned, an L2 flush (a write of 2x the L2), a ~50 µs GPU spin covering the host's dispatch; inside
  it, one event pair around the replayed launches; then the whole device is synchronized and the call maybe
  checked.
- "cuda_graph" (calls under ~20 µs): K = 20 calls, each with its own input set, buffers and outputs, are
  captured in one graph as (poison, flush, call) triples and K (poison, flush) pairs in another; a sample is
  (triples - pairs) / K, so the poison and the flush are paid for by measurement, not guessed. Before every
  replay the K input sets are drawn anew into the captured tensors and the poison bytes are drawn anew; after
  it each of the K calls is maybe checked.

Warm-up calls are the same calls (fresh, poisoned, checked at random), and the first measurement on a device
in a process warms for `SETTLE_SECONDS` as the kit does. Standard library at module level; torch inside.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from sandbox_worker.harness_kit.event_timer import HOST_COVER_CYCLES, flush_bytes_for
from sandbox_worker.harness_kit.graph_timer import GRAPH_UNROLL
from sandbox_worker.harness_kit.poison import poison_
from sandbox_worker.harness_kit.sampling import RunningStats, SamplingLimits, collect, warm_up
from sandbox_worker.harness_kit.timing import GRAPH_THRESHOLD_US, MIN_WARMUP_CALLS_CUDA, SETTLE_SECONDS
from sandbox_worker.judged.fresh_calls import CallSource

MODES = ("events", "cuda_graph")
CACHE_POLICY_EVENTS = "judged_fresh_poisoned_l2_flush_events"
CACHE_POLICY_GRAPH = "judged_fresh_poisoned_l2_flush_cuda_graph"

_settled_devices: set[int] = set()


def measure_replays(source: CallSource, *, repetitions: int, device: str, mode: str, budget_seconds: float,
                    warmup_seconds: float = 0.025, target_rse: float = 0.005, max_samples: int = 10_000) -> dict:
    """The benchmark contract dict for the replays of one case; `mode` is "events", "cuda_graph" or "auto"."""
    import torch

    if mode not in (*MODES, "auto"):
        raise ValueError(f"unknown timing mode {mode!r} for a judged replay (events, cuda_graph or auto)")
    limits = SamplingLimits(min_samples=repetitions, max_samples=max(max_samples, repetitions),
                            target_rse=target_rse, budget_seconds=budget_seconds, warmup_seconds=warmup_seconds)
    target = torch.device(device)
    if target.index is None:
        target = torch.device("cuda", torch.cuda.current_device())
    with torch.cuda.device(target):
        flush_bytes = flush_bytes_for(target)
        flush_buffer = torch.empty(flush_bytes // 4, dtype=torch.int32, device=target)
        extra: dict[str, Any] = {"mode_given": mode}
        first = target.index not in _settled_devices
        started = time.perf_counter()
        events = EventReplays(source, flush_buffer, target)
        warmup = warm_up(events.take_sample, warmup_seconds=max(warmup_seconds, SETTLE_SECONDS if first else 0.0),
                         min_calls=MIN_WARMUP_CALLS_CUDA, max_calls=limits.max_samples)
        _settled_devices.add(target.index)
        extra["warmup_seconds"] = round(time.perf_counter() - started, 4)
        if mode == "auto":
            extra["probe_us"] = statistics.median(warmup[-MIN_WARMUP_CALLS_CUDA:])
            mode = "cuda_graph" if extra["probe_us"] < GRAPH_THRESHOLD_US else "events"
        warmup_count = len(warmup)
        if mode == "cuda_graph":
            graph = GraphReplays(source, flush_buffer, target)
            warmup_count += GRAPH_UNROLL * len(warm_up(graph.take_sample, warmup_seconds=warmup_seconds,
                                                       min_calls=MIN_WARMUP_CALLS_CUDA, max_calls=limits.max_samples))
            samples, _, reason, stats = collect(graph.take_sample, limits)
            policy = CACHE_POLICY_GRAPH
        else:
            samples, _, reason, stats = collect(events.take_sample, limits)
            policy = CACHE_POLICY_EVENTS
    return _result(samples, stats, mode=mode, reason=reason, policy=policy, warmup_count=warmup_count,
                   flush_bytes=flush_bytes, source=source, extra=extra)


def _result(samples: list[float], stats: RunningStats, *, mode: str, reason: str, policy: str, warmup_count: int,
            flush_bytes: int, source: CallSource, extra: dict[str, Any]) -> dict:
    metrics = {"rse": stats.rse, "mode": mode, "flush_bytes": flush_bytes, "stopped_by": reason,
               "calls": source.calls, "checked_calls": source.checked, "check_probability": source.check_probability,
               **extra}
    return {"samples_us": samples, "warmup_count": warmup_count, "cache_policy": policy, "metrics": metrics}


class L2Flush:
    """A write of at least 2x the device's L2 with a changing value (no layer can skip it as a no-op)."""

    def __init__(self, device: Any, buffer: Any = None) -> None:
        import torch

        self.buffer = buffer if buffer is not None else torch.empty(flush_bytes_for(torch.device(device)) // 4,
                                                                    dtype=torch.int32, device=device)
        self.value = 0

    def __call__(self) -> None:
        self.value = (self.value + 1) & 0x7FFFFFFF
        self.buffer.fill_(self.value)


class EventReplays:
    """One fresh call per sample, timed by its own event pair after a flush and a host-dispatch cover."""

    def __init__(self, source: CallSource, flush_buffer: Any, device: Any) -> None:
        import torch

        self.torch = torch
        self.source = source
        self.flush = L2Flush(device, flush_buffer)
        self.device = device
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def take_sample(self) -> tuple[float, Any]:
        torch = self.torch
        call = self.source.prepare()
        stream = torch.cuda.current_stream(self.device)
        self.flush()
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is not None:
            sleep(HOST_COVER_CYCLES)
        self.start.record(stream)
        returned = call.bound()
        self.end.record(stream)
        torch.cuda.synchronize(self.device)
        elapsed_us = self.start.elapsed_time(self.end) * 1000.0
        self.source.after_call(call, returned, "call")
        return max(elapsed_us, 1e-3), None


class GraphReplays:
    """K calls, each with its own input set, buffers and outputs, captured as (poison, flush, call) triples in
    one graph and as (poison, flush) pairs in another; a sample is the difference over K."""

    def __init__(self, source: CallSource, flush_buffer: Any, device: Any, unroll: int = GRAPH_UNROLL) -> None:
        import torch

        self.torch = torch
        self.source = source
        self.device = device
        self.calls = [source.prepare() for _ in range(unroll)]
        largest = max((int(b.numel()) for call in self.calls for b in getattr(call.bound, "buffers", ())), default=1)
        self.noise = source.noise(largest)  # drawn anew before every replay; the graphs copy from it
        self.returned: list[Any] = [None] * unroll

        def poison(call: Any) -> None:
            for buffer in getattr(call.bound, "buffers", ()):
                buffer.copy_(self.noise[: buffer.numel()])
            poison_(list(getattr(call.bound, "outputs", ())))
            poison_(list(call.drawn.out_arguments))

        def pairs() -> None:
            for call in self.calls:
                poison(call)
                flush_buffer.zero_()

        def triples() -> None:
            for index, call in enumerate(self.calls):
                poison(call)
                flush_buffer.zero_()
                self.returned[index] = call.bound()

        side = torch.cuda.Stream(device)  # torch's recipe: eager calls on a side stream before capturing
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            triples()
        torch.cuda.current_stream(device).wait_stream(side)
        torch.cuda.synchronize(device)
        self.pairs_graph = self._capture(pairs)
        self.triples_graph = self._capture(triples)
        torch.cuda.synchronize(device)
        self.start = torch.cuda.Event(enable_timing=True)
        self.middle = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def _capture(self, body: Any) -> Any:
        graph = self.torch.cuda.CUDAGraph()
        with self.torch.cuda.graph(graph):
            body()
        return graph

    def take_sample(self) -> tuple[float, Any]:
        torch = self.torch
        for call in self.calls:
            self.source.refresh(call)
        self.noise.copy_(self.source.noise(int(self.noise.numel())))
        stream = torch.cuda.current_stream(self.device)
        # an untimed lead-in, so both timed graphs start on a busy GPU and run back to back; the pairs go
        # first because they poison the outputs the triples then write and the checks read
        self.pairs_graph.replay()
        self.start.record(stream)
        self.pairs_graph.replay()
        self.middle.record(stream)
        self.triples_graph.replay()
        self.end.record(stream)
        torch.cuda.synchronize(self.device)
        pairs_us = self.start.elapsed_time(self.middle) * 1000.0
        triples_us = self.middle.elapsed_time(self.end) * 1000.0
        for call, returned in zip(self.calls, self.returned, strict=True):
            self.source.after_call(call, returned, "call")
        return max((triples_us - pairs_us) / len(self.calls), 1e-3), None
