"""Architecture aliases and matching them against the device the harness sees."""

from __future__ import annotations

import pytest

from orchestrator.bundle import arch
from protocol.bundle import Target

CUDA_TARGET = Target(backend="cuda", architecture="H200", device="cuda:0")


@pytest.mark.parametrize(("name", "kind", "major"), [
    *[(n, "cuda", 9) for n in ("h200", "H100", "hopper", "sm_90", "sm90", "gh200", "SM-90", "GH 200")],
    *[(n, "cuda", 10) for n in ("b200", "GB200", "blackwell", "sm_100", "sm100")],
    *[(n, "cuda", 8) for n in ("a100", "Ampere", "sm_80")],
    *[(n, "cpu", None) for n in ("cpu", "interpreter", "host", "CPU")],
])
def test_aliases_resolve_to_their_family(name: str, kind: str, major: int | None) -> None:
    spec = arch.resolve_arch(name)
    assert (spec.kind, spec.cuda_major, spec.name) == (kind, major, name)


def test_an_unknown_arch_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match=r"--arch 'mi300' is not a known architecture; use one of .*h200"):
        arch.resolve_arch("mi300")
    assert arch.lookup("synthetic") is None


def _cuda_view(major: int, minor: int, name: str = "NVIDIA GPU") -> arch.DeviceView:
    probe = {"cuda_available": True, "device_count": 1, "name": name, "capability": [major, minor], "hip": None}
    return arch.device_view(CUDA_TARGET, probe)


def test_mismatch_messages_say_what_was_expected_and_what_was_seen() -> None:
    h200 = arch.resolve_arch("h200")
    assert arch.arch_mismatch(h200, _cuda_view(9, 0, "NVIDIA H200")) is None
    assert arch.arch_mismatch(h200, _cuda_view(10, 0, "NVIDIA B200")) == \
        "--arch h200 expects sm_90 (compute capability 9.x), but cuda:0 is sm_100 (NVIDIA B200)"
    cpu_view = arch.device_view(CUDA_TARGET, {"cuda_available": False, "torch": "2.13"})
    assert arch.arch_mismatch(h200, cpu_view) == (
        "--arch h200 expects a CUDA device (sm_90), but the harness sees cpu "
        "(target backend 'cuda', but torch.cuda.is_available() is False)")
    interpreter = arch.device_view(Target(backend="cpu", architecture="interpreter",
                                          environment={"TRITON_INTERPRET": "1"}), None)
    assert arch.arch_mismatch(arch.resolve_arch("cpu"), interpreter) is None
    assert arch.arch_mismatch(arch.resolve_arch("b200"), interpreter) == \
        "--arch b200 expects a CUDA device (sm_100), but the harness sees the CPU interpreter (TRITON_INTERPRET=1)"
    assert arch.arch_mismatch(arch.resolve_arch("cpu"), _cuda_view(9, 0)) == \
        "--arch cpu expects the CPU interpreter, but cuda:0 is sm_90 (NVIDIA GPU)"


def test_device_view_follows_the_target_and_the_probe() -> None:
    assert arch.device_view(CUDA_TARGET, None).kind == "unknown"
    assert arch.device_view(Target(backend="cuda", architecture="H200", device="cuda:3"),
                            {"cuda_available": True, "device_count": 1, "capability": None}).note == \
        "cuda:3 does not exist (1 CUDA device(s) visible)"
    rocm = arch.device_view(CUDA_TARGET, {"cuda_available": True, "name": "MI300X", "capability": [9, 4], "hip": "6.2"})
    assert rocm.kind == "rocm"
    broken = arch.device_view(CUDA_TARGET, {"error": "RuntimeError: driver too old", "cuda_available": False})
    assert broken.kind == "cpu" and "driver too old" in broken.describe()
    assert not arch.needs_probe(Target(backend="cpu", architecture="x"), None)
    assert arch.needs_probe(Target(backend="cpu", architecture="x"), arch.resolve_arch("h100"))
    assert not arch.needs_probe(Target(backend="cuda", architecture="x", environment={"TRITON_INTERPRET": "1"}),
                                arch.resolve_arch("h100"))


def test_the_target_must_match_the_device_too() -> None:
    cpu_view = arch.device_view(CUDA_TARGET, {"cuda_available": False})
    assert arch.target_mismatch(CUDA_TARGET, cpu_view).startswith("target.json backend 'cuda' needs a CUDA device")
    assert arch.target_mismatch(CUDA_TARGET, _cuda_view(9, 0)) is None
    b200_bundle = Target(backend="cuda", architecture="B200", device="cuda:0")
    assert arch.target_mismatch(b200_bundle, _cuda_view(9, 0, "NVIDIA H200")) == \
        "target.json architecture 'B200' expects sm_100 (compute capability 10.x), but cuda:0 is sm_90 (NVIDIA H200)"
    unknown = Target(backend="cpu", architecture="synthetic")
    assert arch.target_mismatch(unknown, arch.device_view(unknown, None)) is None


def test_the_real_probe_on_this_machine_answers_with_the_target_environment() -> None:
    target = Target(backend="cuda", architecture="H200", device="cuda:0", environment={"CUDA_VISIBLE_DEVICES": ""})
    probe = arch.run_probe(arch.sys.executable, target, {"PATH": "/usr/bin:/bin"})
    assert probe.get("error") is None, probe
    assert probe["torch"] and probe["cuda_available"] is False  # hidden by the target's environment (or no GPU)
    assert arch.device_view(target, probe).kind == "cpu"
    missing = arch.run_probe("/nonexistent/python", target, {})
    assert "device probe could not run" in str(missing["error"])
