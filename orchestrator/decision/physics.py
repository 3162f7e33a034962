"""Physics as a check: no measurement faster than the device can move bytes or do arithmetic is believed.

The harness states each case's work (`bytes`: what must move through device memory, each input read once and
each output written once; `flops`: the arithmetic, with `flop_dtype` naming its precision when it knows it);
the device's peaks come from `protocol/devices.py`. A case whose median time would need more than the peak is
impossible: an honest kernel never does it, so the measurement was faked (the evaluation is
`cheat_detected`), or, for the untouched kernel, the harness counts more work than the kernel must do.

What is provable, and only that, is checked. After the judge's L2 flush every input byte comes from DRAM, but
an output may still sit in L2 when the kernel ends (L2 is write-back), so up to the L2's size of the counted
bytes is allowed for: the check is `(bytes - L2) / time <= memory peak`, and `flops / time <= FLOP peak`,
each with `TOLERANCE` for the timer's resolution. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol.devices import DevicePeaks, peaks_for
from protocol.results import Evaluation, EvaluationStatus

TOLERANCE = 0.02  # a measured rate this far above a peak is still put down to the timer


@dataclass(frozen=True)
class CaseRate:
    """What one case achieved against the device's peaks (None where the harness gave no figure)."""

    case_id: str
    median_us: float
    bytes: float | None
    flops: float | None
    flop_dtype: str | None
    bytes_per_s: float | None
    flop_per_s: float | None
    percent_of_memory_peak: float | None
    percent_of_flop_peak: float | None
    percent_of_copy_ceiling: float | None
    impossible: str | None  # why this measurement cannot be, or None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        return None
    return float(value)


def _metric(metrics: Mapping[str, Any], name: str) -> Any:
    """A benchmark metric as the worker reported it (stored under `benchmark.<name>`)."""
    return metrics.get(f"benchmark.{name}", metrics.get(name))


def _rate(amount: float, seconds: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if amount / seconds >= scale:
            return f"{amount / seconds / scale:.1f} {prefix}{unit}/s"
    return f"{amount / seconds:.3g} {unit}/s"


def case_rate(case_id: str, median_us: float, metrics: Mapping[str, Any], peaks: DevicePeaks | None,
              l2_bytes: float | None = None, copy_bytes_per_s: float | None = None) -> CaseRate:
    """The rates of one measured case and, with the device's peaks, whether they are possible."""
    seconds = median_us / 1e6
    amount, flops = _number(_metric(metrics, "bytes")), _number(_metric(metrics, "flops"))
    dtype = _metric(metrics, "flop_dtype")
    dtype = str(dtype) if isinstance(dtype, str) else None
    l2 = _number(_metric(metrics, "device.l2_bytes")) or l2_bytes or 0.0
    copy = _number(_metric(metrics, "device.copy_bytes_per_s")) or copy_bytes_per_s
    bytes_per_s = amount / seconds if amount and seconds > 0 else None
    flop_per_s = flops / seconds if flops and seconds > 0 else None
    impossible = None
    memory_percent = flop_percent = None
    if peaks is not None and seconds > 0:
        if amount:
            memory_percent = 100.0 * amount / seconds / peaks.memory_bytes_per_s
            provable = max(amount - l2, 0.0)
            if provable / seconds > peaks.memory_bytes_per_s * (1 + TOLERANCE):
                impossible = (f"{case_id}: {_rate(amount, seconds, 'B')} ({amount / 1e6:.1f} MB in {median_us:.2f} µs); "
                              f"even with {l2 / 2**20:.0f} MiB held in L2 it needs {_rate(provable, seconds, 'B')} "
                              f"> {peaks.memory_bytes_per_s / 1e12:.2f} TB/s, the {peaks.name} memory peak")
        if flops:
            peak = peaks.flop_per_s_for(dtype)
            flop_percent = 100.0 * flops / seconds / peak
            if impossible is None and flops / seconds > peak * (1 + TOLERANCE):
                impossible = (f"{case_id}: {_rate(flops, seconds, 'FLOP')} ({flops:.3g} FLOP in {median_us:.2f} µs) "
                              f"> {peak / 1e12:.0f} TFLOP/s, the {peaks.name} {dtype or 'highest'} peak")
    return CaseRate(case_id=case_id, median_us=median_us, bytes=amount, flops=flops, flop_dtype=dtype,
                    bytes_per_s=bytes_per_s, flop_per_s=flop_per_s, percent_of_memory_peak=memory_percent,
                    percent_of_flop_peak=flop_percent,
                    percent_of_copy_ceiling=100.0 * bytes_per_s / copy if bytes_per_s and copy else None,
                    impossible=impossible)


def evaluation_rates(evaluation: Evaluation, device: str | None = None) -> list[CaseRate]:
    """Each benchmarked case of an evaluation against the peaks of the device its worker reported."""
    peaks = peaks_for(device or evaluation.worker.device)
    return [case_rate(measured.case_id, measured.stats.median, measured.metrics, peaks)
            for measured in evaluation.cases if measured.stats is not None and measured.stats.median > 0]


def impossible_cases(evaluation: Evaluation, device: str | None = None) -> list[str]:
    """Why this evaluation's measurements cannot be (empty when they can, or nothing was measured)."""
    if evaluation.status is not EvaluationStatus.OK:
        return []
    return [rate.impossible for rate in evaluation_rates(evaluation, device) if rate.impossible]


def physics_verdict(evaluation: Evaluation, *, untouched: bool) -> str | None:
    """The reason an evaluation is not believed, for its record; None when physics allows it."""
    reasons = impossible_cases(evaluation)
    if not reasons:
        return None
    if untouched:
        return ("the untouched kernel measured faster than the device allows: " + "; ".join(reasons) + ". The "
                "harness's work figures (bytes, flops) count more than the kernel must do: fix its work() so that each "
                "counts only what every call must read, write and compute")
    return "faster than the device allows: " + "; ".join(reasons)


def device_peaks_line(device: str | None) -> str:
    """One sentence for the run's log and report: which peaks the physics check uses, or why there is none."""
    peaks = peaks_for(device)
    if peaks is None:
        return (f"no physics check: no peak table entry for the device {device!r} (protocol/devices.py); "
                "measurements are not compared with what the device can do")
    return (f"physics check against the {peaks.name}: memory {peaks.memory_bytes_per_s / 1e12:.2f} TB/s, "
            f"dense {peaks.highest_flop_per_s / 1e12:.0f} TFLOP/s at most ({peaks.source})")
