"""Which GPUs a local batch may use: `--gpus 0,1`, `all` (what this process can see) or `none`.

"All" honours an existing CUDA_VISIBLE_DEVICES (those entries are the GPUs), else asks `nvidia-smi -L`, and
asks torch only where an NVIDIA driver is loaded but nvidia-smi is missing (importing torch costs a second
or two, for nothing on a CPU machine).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

NVIDIA_SMI_SECONDS = 20.0
GPU_LINE = re.compile(r"^GPU (\d+):", re.MULTILINE)


class GpuSpecError(ValueError):
    pass


def parse_gpu_spec(spec: str) -> list[str] | None:
    """`0,1` -> ["0", "1"]; `none` -> []; `all` -> None (discover). Indices are kept as written."""
    text = spec.strip().lower()
    if text == "all":
        return None
    if text in ("none", ""):
        return []
    gpus = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() for part in gpus):
        raise GpuSpecError(f"--gpus takes indices like 0,1 or 'all' or 'none', not {spec!r}")
    if len(set(gpus)) != len(gpus):
        raise GpuSpecError(f"--gpus lists a GPU twice: {spec!r}")
    return gpus


def visible_from_environment(environment: Mapping[str, str]) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES' entries; None when it is unset (then every GPU is visible)."""
    value = environment.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip() and part.strip() != "-1"]


def parse_nvidia_smi_list(text: str) -> list[str]:
    return GPU_LINE.findall(text)


def _torch_gpus() -> list[str]:
    import torch

    return [str(index) for index in range(torch.cuda.device_count())]


def discover_gpus() -> list[str]:
    visible = visible_from_environment(os.environ)
    if visible is not None:
        return visible
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi:
        try:
            listed = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_SECONDS,
                                    stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return []
        return parse_nvidia_smi_list(listed.stdout) if listed.returncode == 0 else []
    return _torch_gpus() if Path("/proc/driver/nvidia/gpus").is_dir() else []


def batch_gpus(spec: str) -> list[str]:
    chosen = parse_gpu_spec(spec)
    return discover_gpus() if chosen is None else chosen
