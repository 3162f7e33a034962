"""CUDA-graph timing ("cuda_graph" mode of `timing.measure`), for kernels shorter than about 20 µs.

Per-call events time such kernels' launch latency more than the kernel, so K = 20 unrolled (flush, call)
pairs are captured in one CUDA graph and K flushes alone in another; both are replayed back to back
between three events, and (pairs - flushes) / K is one sample. The graph-launch latency is in both terms
and cancels, the flush still precedes every call, and averaging K calls tames the flush's own noise that
the subtraction adds. An untimed replay of the flushes graph runs first, so both timed graphs run on a
GPU that is already busy (this cut the run-to-run CV of a 2^16 add from 2.5 % to 0.9 %).

We tried "events around each replay of a one-call graph" first: it read 4.1 µs for that add, no better
than plain events, because the device-side graph-launch latency sits inside the event pair. Measured on
the H200 (2026-11-30, Triton fp32 vector add, medians of 8 runs of `measure`): 2^16 elements: events
4.2 µs (launch-bound, noisy), cuda_graph 2.05 µs (CV 0.9 %) with a cold L2, do_bench_cudagraph 1.23 µs
with a warm L2; 2^20: 7.5, 5.3 and 2.4 µs; 2^26: events 188.8 µs, cuda_graph 186.5 µs (CV 0.03 %),
do_bench 189.7 µs. A sample in this mode is a mean of K calls, so it scatters less than a single call
would; it is clamped to 0.001 µs should noise ever make it negative.
Only the standard library is imported at module level; torch is imported inside the class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sandbox_worker.harness_kit.poison import poison_

GRAPH_UNROLL = 20  # (flush, call) pairs per graph replay in "cuda_graph" mode
WARMUP_SIDE_STREAM_CALLS = 3  # eager calls on the capture stream before a graph capture (torch docs)


class GraphTimer:
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
