"""Measured device ceilings the HTML report compares achieved bandwidth and FLOP/s against.

Only measured figures belong here, never datasheet peaks: a ceiling is what a kernel could actually reach on
that host, so "percent of ceiling" reads as headroom. A device with no entry, or a figure left None, gets the
achieved number alone and the page says that no ceiling is known.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class DeviceCeilings(BaseModel):
    model_config = ConfigDict(frozen=True)

    device_contains: str  # matched case-insensitively against the device name the worker saw
    bandwidth_bytes_per_s: float | None
    flop_per_s: float | None
    source: str


# Source: /work/shared/reference/h200.md, "Timing noise" (H200 test host, 2026-11-30): a 2^26 fp32 vector add
# reached 4.24 TB/s against a copy ceiling of about 4.3 TB/s. No FLOP/s ceiling was measured there.
MEASURED_CEILINGS: tuple[DeviceCeilings, ...] = (
    DeviceCeilings(
        device_contains="H200",
        bandwidth_bytes_per_s=4.3e12,
        flop_per_s=None,
        source="measured copy ceiling on the H200 test host, 2026-11-30 (docs/reports.md)",
    ),
)


def ceilings_for(device: str | None) -> DeviceCeilings | None:
    """The measured ceilings of the first entry whose name occurs in `device`; None when none matches."""
    if not device:
        return None
    name = device.lower()
    return next((entry for entry in MEASURED_CEILINGS if entry.device_contains.lower() in name), None)
