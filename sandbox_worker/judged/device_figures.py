"""What the device this worker measures on can do, measured once per process: its L2 size and copy ceiling.

The orchestrator compares every case's achieved rate with the device's physical peak (`protocol/devices.py`,
`orchestrator/decision/physics.py`); an output written into L2 need not reach DRAM before a kernel ends, so
the check allows the L2's size, and the report puts each case's bandwidth beside the copy ceiling measured
here: a device-to-device copy of 256 MiB (bytes read plus bytes written over the best of five timed copies).
Standard library at module level; torch inside.
"""

from __future__ import annotations

from typing import Any

COPY_BYTES = 256 << 20
COPY_REPEATS = 5

_measured: dict[str, dict[str, Any]] = {}


def device_figures(device: str) -> dict[str, Any]:
    """{"device.name", "device.l2_bytes", "device.copy_bytes_per_s"} for `device`, measured on the first call."""
    if device not in _measured:
        _measured[device] = _measure(device)
    return dict(_measured[device])


def _measure(device: str) -> dict[str, Any]:
    import torch

    target = torch.device(device)
    properties = torch.cuda.get_device_properties(target)
    source = torch.empty(COPY_BYTES, dtype=torch.uint8, device=target).fill_(1)
    destination = torch.empty_like(source)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    destination.copy_(source)  # warm: the first copy pays for launch set-up
    best_ms = float("inf")
    for _ in range(COPY_REPEATS):
        start.record()
        destination.copy_(source)
        end.record()
        end.synchronize()
        best_ms = min(best_ms, start.elapsed_time(end))
    del source, destination
    return {"device.name": str(properties.name),
            "device.l2_bytes": int(getattr(properties, "L2_cache_size", 0) or 0) or None,
            "device.copy_bytes_per_s": 2 * COPY_BYTES / (best_ms / 1000.0) if best_ms > 0 else None}
