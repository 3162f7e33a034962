"""What the HTML report compares achieved bandwidth and FLOP/s against: the device's datasheet peaks, and the
copy ceiling the run measured where it recorded one.

The peaks come from `protocol/devices.py` (one table in the repository, each entry with its source; the same
table the physics check uses), matched on the device name the baseline's worker reported. A datasheet peak is
what no kernel exceeds, so "percent of peak" reads as headroom against the hardware; the measured copy ceiling
(`device.copy_bytes_per_s` in a case's benchmark metrics, where the judge measured one on the run's own GPU) is
what a plain copy reached there, a nearer bar for a memory-bound kernel. A device without a table entry gets the
achieved figures alone, and the page says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from orchestrator.decision.profile_rules import number
from protocol.devices import DevicePeaks, peaks_for
from protocol.results import Evaluation

COPY_CEILING_METRIC = "device.copy_bytes_per_s"


class DeviceCeilings(BaseModel):
    model_config = ConfigDict(frozen=True)

    device: str  # the reported name
    peaks: DevicePeaks | None  # None: no entry in protocol/devices.py
    copy_bytes_per_s: float | None  # measured in this run; None when no case's metrics carry it

    @property
    def memory_bytes_per_s(self) -> float | None:
        return self.peaks.memory_bytes_per_s if self.peaks else None

    def flop_per_s(self, dtype: str | None) -> float | None:
        return self.peaks.flop_per_s_for(dtype) if self.peaks else None


def measured_copy_ceiling(evaluations: Sequence[Evaluation | None]) -> float | None:
    """The copy ceiling a run's workers measured (the highest any case reports: each is a lower bound of what the
    device can copy), or None."""
    found = [value for evaluation in evaluations if evaluation for case in evaluation.cases
             if (value := number(case.metrics.get(f"benchmark.{COPY_CEILING_METRIC}",
                                                  case.metrics.get(COPY_CEILING_METRIC)))) is not None and value > 0]
    return max(found) if found else None


def ceilings_for(device: str | None, evaluations: Sequence[Evaluation | None] = ()) -> DeviceCeilings | None:
    """The device's peaks and the run's measured copy ceiling; None when neither is known (no GPU, or a device
    without a table entry and no measurement)."""
    peaks = peaks_for(device)
    copy = measured_copy_ceiling(evaluations)
    if peaks is None and copy is None:
        return None
    return DeviceCeilings(device=device or "unknown", peaks=peaks, copy_bytes_per_s=copy)
