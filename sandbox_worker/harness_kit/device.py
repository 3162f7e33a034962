"""Whether this process can reach an NVIDIA GPU to profile, and if not, why (one line for diagnostics)."""

from __future__ import annotations

import os


def cuda_unavailable_reason() -> str | None:
    """Why no NVIDIA GPU work can be profiled here (None when it can)."""
    if os.environ.get("TRITON_INTERPRET", "").strip() not in ("", "0"):
        return "TRITON_INTERPRET is set: kernels run in the CPU interpreter, there is no GPU launch to profile"
    try:
        import torch
    except ImportError:
        return "torch is not importable: cannot reach a CUDA device"
    try:
        if not torch.cuda.is_available():
            return "no CUDA device (CPU-only machine)"
    except Exception as exc:  # noqa: BLE001 - a broken driver is just "unavailable"
        return f"CUDA initialisation failed: {type(exc).__name__}: {exc}"
    if getattr(torch.version, "hip", None):
        return "ROCm device: ncu and the NVIDIA profiling path do not apply"
    return None
