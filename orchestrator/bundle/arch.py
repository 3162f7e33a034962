"""Architecture names (`--arch`, target.json `architecture`) and whether the host matches them.

A bundle is never silently reused on a nearby device: a bundle made for an H200 must not quietly run on
a B200, nor on the CPU interpreter. Names are normalised (lowercase; `-` and spaces become `_`) and map
to a family: a CUDA compute-capability major, or the CPU interpreter. What the harness actually sees
comes from a probe child started with the target's environment (`run_probe`), since only the worker's
interpreter knows which torch and GPU it gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from protocol.bundle import BundleError, Target

CPU = "cpu"
CUDA = "cuda"

# normalised alias -> (kind, cuda major)
ALIASES: dict[str, tuple[str, int | None]] = {
    **dict.fromkeys(("h200", "h100", "h20", "h800", "hopper", "sm_90", "sm90", "sm_90a", "sm90a", "gh200"),
                    (CUDA, 9)),
    **dict.fromkeys(("b200", "gb200", "b100", "blackwell", "sm_100", "sm100", "sm_100a", "sm100a"), (CUDA, 10)),
    **dict.fromkeys(("a100", "a800", "ampere", "sm_80", "sm80"), (CUDA, 8)),
    **dict.fromkeys(("cpu", "interpreter", "host", "triton_interpreter"), (CPU, None)),
}
CUDA_BACKENDS = frozenset({"cuda", "nvidia"})
CPU_BACKENDS = frozenset({"cpu", "host", "interpreter"})
PROBE_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class ArchSpec:
    """What an architecture name asks for."""

    name: str  # as the user spelled it
    kind: str  # "cuda" | "cpu"
    cuda_major: int | None = None

    def describe(self) -> str:
        return f"sm_{self.cuda_major}0" if self.kind == CUDA else "the CPU interpreter"


def normalize(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def lookup(name: str) -> ArchSpec | None:
    """The family of a known name, else None."""
    key = normalize(name)
    found = ALIASES.get(key) or ALIASES.get(key.replace("_", ""))  # "GH 200" -> gh_200 -> gh200
    return None if found is None else ArchSpec(name=name, kind=found[0], cuda_major=found[1])


def resolve_arch(name: str) -> ArchSpec:
    """`--arch` must be a known name: an unknown one cannot be checked, so it is refused, not skipped."""
    spec = lookup(name)
    if spec is None:
        known = sorted(ALIASES)
        raise ValueError(f"--arch {name!r} is not a known architecture; use one of {', '.join(known)}")
    return spec


def resolve_arch_flag(value: str | None) -> ArchSpec | None:
    """`--arch` as given on a command line (None when absent); an unknown name is a `BundleError`."""
    if value is None:
        return None
    try:
        return resolve_arch(value)
    except ValueError as exc:
        raise BundleError(str(exc)) from None


@dataclass
class DeviceView:
    """The device the harness sees, as decided from the target and the probe."""

    kind: str  # "cuda" | "cpu" | "rocm" | "unknown"
    device: str  # "cuda:0", "cpu", ...
    name: str | None = None  # GPU name, "cpu" or "CPU interpreter"
    capability: tuple[int, int] | None = None
    interpreter: bool = False
    probe: dict[str, object] | None = None  # raw probe answer (None when no probe was needed)
    note: str = ""

    def sm(self) -> str | None:
        return None if self.capability is None else f"sm_{self.capability[0]}{self.capability[1]}"

    def describe(self) -> str:
        if self.kind == CUDA:
            return f"{self.device} is {self.sm()}" + (f" ({self.name})" if self.name else "")
        if self.interpreter:
            return "the harness sees the CPU interpreter (TRITON_INTERPRET=1)"
        return f"the harness sees {self.device}" + (f" ({self.note})" if self.note else "")

    def to_json(self) -> dict[str, object]:
        payload = asdict(self)
        payload["capability"] = list(self.capability) if self.capability else None
        payload["sm"] = self.sm()
        return payload


def interpreter_requested(target: Target) -> bool:
    return target.environment.get("TRITON_INTERPRET", "").strip() not in ("", "0")


def needs_probe(target: Target, arch: ArchSpec | None) -> bool:
    """A probe (a torch import in a child) is only needed when a GPU could be involved."""
    if interpreter_requested(target):
        return False
    backend = normalize(target.backend)
    return backend not in CPU_BACKENDS or (arch is not None and arch.kind == CUDA)


PROBE_SOURCE = r"""
import json, sys
index = int(sys.argv[1])
out = {"python": sys.version.split()[0], "torch": None, "cuda_available": False, "device_count": 0,
       "name": None, "capability": None, "hip": None, "error": None}
try:
    import torch
    out["torch"] = torch.__version__
    out["hip"] = getattr(torch.version, "hip", None)
    if torch.cuda.is_available():
        out["cuda_available"] = True
        out["device_count"] = torch.cuda.device_count()
        if index < out["device_count"]:
            out["name"] = torch.cuda.get_device_name(index)
            out["capability"] = list(torch.cuda.get_device_capability(index))
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
try:  # the workers' Triton, read as orchestrator/bundle/interpreter.py reads its own
    import importlib.metadata as md, importlib.util, pathlib
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.submodule_search_locations:
        location = pathlib.Path(next(iter(spec.submodule_search_locations)))
        facts = {"distribution": None, "version": None, "path": str(location),
                 "tlx": (location / "language" / "extra" / "tlx" / "__init__.py").is_file()}
        for name in ("fbtriton", "pytorch-triton", "triton"):
            try:
                found = md.distribution(name)
            except md.PackageNotFoundError:
                continue
            if pathlib.Path(str(found.locate_file("triton"))).resolve() == location.resolve():
                facts["distribution"], facts["version"] = name, found.version
                break
        out["triton"] = facts
except Exception as exc:
    out["triton"] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(out))
"""


def _device_index(target: Target) -> int:
    device = (target.device or "cuda:0").strip()
    if ":" in device:
        try:
            return int(device.split(":", 1)[1])
        except ValueError:
            return 0
    return 0


def run_probe(worker_python: str, target: Target, parent_env: Mapping[str, str]) -> dict[str, object]:
    """Ask the worker's interpreter, under the worker's environment rules plus the target's environment,
    which torch and which GPU it sees."""
    from orchestrator.worker.environment import build_worker_environment, make_scratch_dirs

    with tempfile.TemporaryDirectory(prefix="tlx-agent-probe-") as scratch:
        scratch_path = Path(scratch)
        make_scratch_dirs(scratch_path)
        env, _refused = build_worker_environment(parent_env, target.environment, scratch=scratch_path, token="probe")
        try:
            completed = subprocess.run([worker_python, "-s", "-c", PROBE_SOURCE, str(_device_index(target))],
                                       capture_output=True, text=True, env=env, cwd=scratch,
                                       stdin=subprocess.DEVNULL, timeout=PROBE_TIMEOUT_SECONDS)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"error": f"device probe could not run: {type(exc).__name__}: {exc}"}
    lines = completed.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = " ".join(completed.stderr.split())[-300:]
        return {"error": f"device probe exited with {completed.returncode}: {tail or 'no output'}"}


def device_view(target: Target, probe: dict[str, object] | None) -> DeviceView:
    """Which device the harness runs on: the target's backend decides, the probe confirms."""
    backend = normalize(target.backend)
    if interpreter_requested(target):
        return DeviceView(kind=CPU, device="cpu", name="CPU interpreter", interpreter=True, probe=probe)
    if backend in CPU_BACKENDS:
        return DeviceView(kind=CPU, device="cpu", name="cpu", probe=probe, note=f"target backend {target.backend!r}")
    if probe is None:
        return DeviceView(kind="unknown", device=target.device or "?", probe=None, note="not probed")
    if probe.get("error") and not probe.get("cuda_available"):
        return DeviceView(kind=CPU, device="cpu", probe=probe, note=str(probe["error"]))
    if not probe.get("cuda_available"):
        return DeviceView(kind=CPU, device="cpu", probe=probe,
                          note=f"target backend {target.backend!r}, but torch.cuda.is_available() is False")
    device = f"cuda:{_device_index(target)}"
    capability = probe.get("capability")
    if probe.get("hip"):
        return DeviceView(kind="rocm", device=device, name=str(probe.get("name")), probe=probe,
                          note=f"ROCm {probe['hip']}")
    if not isinstance(capability, list) or len(capability) != 2:
        count = probe.get("device_count")
        return DeviceView(kind=CPU, device="cpu", probe=probe,
                          note=f"{device} does not exist ({count} CUDA device(s) visible)")
    if backend not in CUDA_BACKENDS:
        return DeviceView(kind="unknown", device=device, name=str(probe.get("name")),
                          capability=(int(capability[0]), int(capability[1])), probe=probe,
                          note=f"unknown backend {target.backend!r}")
    return DeviceView(kind=CUDA, device=device, name=str(probe.get("name")),
                      capability=(int(capability[0]), int(capability[1])), probe=probe)


def observe_device(target: Target, arch: ArchSpec | None, worker_python: str = sys.executable,
                   parent_env: Mapping[str, str] | None = None) -> DeviceView:
    probe = run_probe(worker_python, target, os.environ if parent_env is None else parent_env) \
        if needs_probe(target, arch) else None
    return device_view(target, probe)


def arch_mismatch(spec: ArchSpec, view: DeviceView, *, label: str | None = None) -> str | None:
    """One line saying why `spec` does not match the device the harness sees, else None."""
    label = label or f"--arch {spec.name}"
    if spec.kind == CUDA:
        if view.kind != CUDA:
            return f"{label} expects a CUDA device ({spec.describe()}), but {view.describe()}"
        assert view.capability is not None
        if view.capability[0] != spec.cuda_major:
            return f"{label} expects {spec.describe()} (compute capability {spec.cuda_major}.x), but {view.describe()}"
        return None
    if view.kind != CPU:
        return f"{label} expects the CPU interpreter, but {view.describe()}"
    return None


def target_mismatch(target: Target, view: DeviceView) -> str | None:
    """The bundle's own claims (backend, architecture) against the device: a CUDA bundle that would
    silently fall back to the CPU, or an H200 bundle on a B200, is a mismatch."""
    backend = normalize(target.backend)
    if backend in CUDA_BACKENDS and not interpreter_requested(target) and view.kind != CUDA:
        return f"target.json backend {target.backend!r} needs a CUDA device, but {view.describe()}"
    known = lookup(target.architecture)
    if known is not None:
        return arch_mismatch(known, view, label=f"target.json architecture {target.architecture!r}")
    return None
