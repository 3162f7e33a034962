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


def activate_triton_cuda() -> None:
    """Initialise CUDA here and hand Triton its CUDA driver directly.

    Triton otherwise picks its driver by asking `torch.cuda.is_available()`. Inside the sandbox NVML cannot
    start, so that check falls back to the CUDA runtime's device count, which a process forked from the
    judge may not get: a launch then fails with "0 active drivers" although CUDA works in the process.
    """
    import torch
    from triton.backends.nvidia.driver import CudaDriver
    from triton.runtime import driver

    torch.cuda.init()
    if not isinstance(driver._active, CudaDriver):  # noqa: SLF001 - reading `active` would run the check
        driver.set_active(CudaDriver())
