"""Per-call CUDA event timing ("events" mode of `timing.measure`).

For every timed call:
- an L2 flush first: a write of a buffer at least 2x the device's L2
  (`get_device_properties().L2_cache_size`), so no call profits from data left by the previous one;
- a ~50 µs GPU spin that covers the host's dispatch of the start event, the call and the end event;
- one CUDA event pair around the call, then `torch.cuda.synchronize()` (the whole device) before the
  events are read, so calls never overlap (a candidate cannot batch calls and skip some) and work left
  on another stream is drained;
- a "fence" event recorded right after that synchronize, which shows how long the drain took. A drain
  clearly longer than a calibrated honest one means the call hid work on a side stream: the samples
  then include that work (see `stream_escape`).
Only the standard library is imported at module level; torch is imported inside the CUDA paths.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from sandbox_worker.harness_kit.poison import PoisoningCaller

FLUSH_L2_MULTIPLE = 2
HOST_COVER_CYCLES = 100_000  # about 50 µs at the H200's 1.98 GHz: longer than a Python launch
FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024  # what do_bench uses when the L2 size is unknown
FENCE_CALIBRATION_CALLS = 16
STREAM_ESCAPE_MIN_US = 5.0  # drains this much longer than the calibrated ones count as hidden work
STREAM_ESCAPE_MIN_FRACTION = 0.05  # ... and at least this fraction of the call's time


def flush_bytes_for(device: Any) -> int:
    """Bytes written before every timed call: 2x the device's L2 (fallback 256 MiB if unknown)."""
    import torch

    l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    if l2_bytes <= 0:
        return FALLBACK_FLUSH_BYTES
    return FLUSH_L2_MULTIPLE * l2_bytes


class EventTimer:
    """One event pair per call on the current stream, with an L2 flush in front and a device-wide
    synchronize plus a fence event behind (the fence measures how long other streams kept the device
    busy after the call's own stream was done)."""

    def __init__(
        self, fn: Callable[[], Any], flush_buffer: Any, device: Any, *, poison_outputs: bool
    ) -> None:
        import torch

        self._torch = torch
        self._call = PoisoningCaller(fn, enabled=poison_outputs)
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


def stream_escape(
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
