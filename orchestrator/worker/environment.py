"""The environment a worker starts with: an allow-list, never the orchestrator's secrets."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

# Variables a worker may inherit; everything else is dropped.
ALLOWED_NAMES = frozenset({
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING",
    "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TRITON_INTERPRET",
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
})
ALLOWED_PREFIXES = ("TRITON_", "TORCH_", "NVIDIA_", "CUDA_", "PYTORCH_")
# Never forwarded, even when an allowed prefix matches or the target asks for it.
SECRET_PATTERN = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION)", re.IGNORECASE)
# Set by the orchestrator per worker; a target may not override them.
RESERVED = frozenset({
    "TLX_PROTOCOL_FD", "TLX_WORKER_TOKEN", "TLX_WORKER_SCRATCH", "HOME", "TMPDIR", "TRITON_CACHE_DIR",
    "PYTHONPATH", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "PYTHONUNBUFFERED",
})


# On every worker's PYTHONPATH: the checkout that holds sandbox_worker/ (and its harness kit).
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
# The scratch directories HOME, TMPDIR and TRITON_CACHE_DIR name; they exist before the child starts.
SCRATCH_DIRS = ("home", "tmp", "triton_cache")


def triton_cache_dir(scratch: Path) -> Path:
    """The Triton cache a worker with this scratch directory compiles into (its TRITON_CACHE_DIR)."""
    return scratch / "triton_cache"


def make_scratch_dirs(scratch: Path) -> None:
    for sub in SCRATCH_DIRS:
        (scratch / sub).mkdir(parents=True, exist_ok=True)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_PATTERN.search(name)) or name.startswith(("GIT_", "HG", "SSH_", "AWS_", "GH_", "GITHUB_"))


def _split_target_environment(target_environment: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(the target's variables a worker gets, the names it does not get, each with why)."""
    accepted: dict[str, str] = {}
    refused: list[str] = []
    for name, value in target_environment.items():
        if name in RESERVED:
            refused.append(f"{name} (reserved for the sandbox)")
        elif is_secret_name(name):
            refused.append(f"{name} (looks like a credential)")
        else:
            accepted[name] = value
    return accepted, refused


def build_worker_environment(
    parent: Mapping[str, str],
    target_environment: Mapping[str, str] | None = None,
    *,
    scratch: Path,
    token: str,
    pythonpath: str = PROJECT_ROOT,
) -> tuple[dict[str, str], list[str]]:
    """Return the worker's environment and the names dropped from the target's environment (with why).

    Every child that stands in for a worker gets its environment here (evaluations, the device probe in
    orchestrator/bundle/arch.py, the isolation probe in orchestrator/worker/doctor.py), so there is one
    allow-list. `target_environment=None`: a child that runs no bundle, so no target.json environment.
    `scratch` must hold SCRATCH_DIRS (`make_scratch_dirs`).
    """
    env = {
        name: value
        for name, value in parent.items()
        if (name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)) and not is_secret_name(name)
        and name not in RESERVED
    }
    accepted, refused = _split_target_environment(target_environment or {})
    env.update(accepted)
    env.update({
        "TLX_WORKER_TOKEN": token,
        "TLX_WORKER_SCRATCH": str(scratch),
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        "TRITON_CACHE_DIR": str(triton_cache_dir(scratch)),
        "PYTHONPATH": pythonpath,
        "PYTHONSAFEPATH": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONUNBUFFERED": "1",
        # torch.cuda.is_available() through NVML, not the CUDA runtime, where NVML can start (isolation off): a
        # GPU judge forks its candidate's process after that check, and a process that has initialised CUDA
        # cannot fork one that uses it. Inside the sandbox NVML cannot start and torch falls back to the
        # runtime; both judged processes then set Triton's driver themselves (harness_kit.device).
        "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
    })
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env, refused


def refused_target_environment(target_environment: Mapping[str, str]) -> list[str]:
    """The target.json environment names a worker will not get, each with why (logged and in run.json)."""
    return _split_target_environment(target_environment)[1]
