"""`tlx-agent doctor`'s tool checks, one test per check, against real interpreters and real programs.

On this CPU machine the project's own interpreter gives the present answers for torch, upstream Triton and
Proton and the absent answers for TLX and the GPU; an empty venv gives the absent torch and Triton; a package
laid out as Meta's fbtriton wheel lays itself out (a `triton` package with `language/extra/tlx`, owned by an
`fbtriton` dist-info) on PYTHONPATH gives the TLX build's answers; `ncu`, `codex` and `claude` are executables
written to a temporary PATH that answer `--version` as those programs do.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.worker import toolchain
from tests.conftest import run_cli

pytestmark = pytest.mark.timeout(300)


def by_name(checks):
    return {check.name: check for check in checks}


@pytest.fixture(scope="module")
def here():
    return by_name(toolchain.python_checks(toolchain.probe_worker_python(sys.executable), sys.executable))


@pytest.fixture(scope="module")
def empty_venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("venv") / "empty"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    return root / "bin" / "python"


def test_torch_present_with_its_build(here):
    import torch

    check = here["torch"]
    assert check.status == "ok" and check.facts["version"] == torch.__version__
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only build"
    assert check.detail == f"torch {torch.__version__} ({build}), python {sys.version.split()[0]}"


def test_torch_and_triton_absent_say_how_to_install(empty_venv):
    checks = by_name(toolchain.python_checks(toolchain.probe_worker_python(str(empty_venv)), str(empty_venv)))
    assert checks["torch"].status == "missing" and "No module named 'torch'" in checks["torch"].detail
    assert "install PyTorch into the worker interpreter" in checks["torch"].fix
    assert checks["triton"].status == "missing" and "setup_env.sh --tlx" in checks["triton"].fix
    assert checks["cuda_device"].status == "missing"


def test_upstream_triton_and_proton_present(here):
    import triton

    assert here["triton"].status == "ok"
    assert here["triton"].detail.startswith(f"triton {triton.__version__} (upstream triton) at ")
    assert here["proton"].status == "ok" and here["proton"].detail == "triton.profiler (Proton) imports"


def test_tlx_absent_from_upstream_triton_names_the_wheel_and_the_python_it_needs(here):
    check = here["tlx"]
    assert check.status == "warning"
    assert check.detail.startswith("TLX kernels cannot run: upstream triton has no triton.language.extra.tlx")
    assert "scripts/setup_env.sh --tlx" in check.fix and "fbtriton" in check.fix
    if not sys.version.startswith("3.12"):
        assert f"this interpreter is Python {sys.version.split()[0]}, so use a 3.12 one" in check.fix


def fbtriton_layout(root: Path) -> Path:
    """A `triton` package with TLX and Proton modules, installed by a dist-info named fbtriton."""
    package = root / "triton"
    for module in ("", "language", "language/extra", "language/extra/tlx", "profiler"):
        (package / module).mkdir(parents=True, exist_ok=True)
        (package / module / "__init__.py").write_text("")
    (package / "__init__.py").write_text('__version__ = "3.7.4"\n')
    info = root / "fbtriton-3.7.4.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fbtriton\nVersion: 3.7.4\n")
    (info / "top_level.txt").write_text("triton\n")
    return root


def test_meta_triton_with_tlx_is_recognised(tmp_path, empty_venv):
    site = fbtriton_layout(tmp_path / "site")
    facts = toolchain.probe_worker_python(str(empty_venv), {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)})
    checks = by_name(toolchain.python_checks(facts, str(empty_venv)))
    assert checks["triton"].status == "ok"
    assert checks["triton"].detail == f"triton 3.7.4 (Meta's fbtriton) at {site / 'triton' / '__init__.py'}"
    assert checks["tlx"].status == "ok" and checks["tlx"].detail == "triton.language.extra.tlx imports"
    assert checks["proton"].status == "ok"


def test_no_gpu_is_said_with_what_still_runs(here):
    check = here["cuda_device"]
    assert check.status == "warning"
    assert "GPU targets cannot run" in check.detail and check.fix


def test_a_gpu_is_named_with_its_capability():
    facts = {"version": "2.11.0", "cuda_build": "12.8", "cuda_available": True, "device": "NVIDIA H200",
             "capability": [9, 0], "device_count": 1}
    check = by_name(toolchain.python_checks({"torch": facts, "triton": {"error": "x"}, "tlx": {"error": "x"},
                                             "proton": {"error": "x"}, "python": "3.12.3"}, "python3"))["cuda_device"]
    assert check.status == "ok" and check.detail == "NVIDIA H200, compute capability 9.0 (sm_90), 1 visible"


def test_a_missing_worker_interpreter_fails_every_python_check_with_the_flag_to_fix():
    checks = toolchain.python_checks(toolchain.probe_worker_python("/nonexistent/python3"), "/nonexistent/python3")
    assert [check.name for check in checks] == ["torch", "triton", "tlx", "proton", "cuda_device"]
    assert all(c.status == "missing" and "does not exist" in c.detail and "--worker-python" in c.fix for c in checks)


def program(directory: Path, name: str, output: str, code: int = 0) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\ncat <<'OUT'\n{output}\nOUT\nexit {code}\n")
    path.chmod(0o755)


@pytest.mark.parametrize("name, output, version", [
    ("ncu", "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\n"
            "Version 2025.1.1.0 (build 35528883) (public-release)", "Version 2025.1.1.0 (build 35528883) (public-release)"),
    ("codex", "codex-cli 0.58.0", "codex-cli 0.58.0"),
    ("claude", "2.0.31 (Claude Code)", "2.0.31 (Claude Code)"),
])
def test_a_program_on_path_is_found_with_its_version(tmp_path, name, output, version):
    program(tmp_path, name, output)
    check = toolchain.program_check(name, str(tmp_path))
    assert check.status == "ok" and check.detail == f"{tmp_path / name}: {version}"


@pytest.mark.parametrize("name", sorted(toolchain.PROGRAMS))
def test_a_program_missing_from_path_says_how_to_get_it(tmp_path, name):
    check = toolchain.program_check(name, str(tmp_path))
    assert check.status == "missing" and check.detail.startswith("not on PATH; needed for ")
    assert check.fix == toolchain.PROGRAMS[name][1]


def test_a_program_that_does_not_answer_its_version_is_a_warning(tmp_path):
    program(tmp_path, "ncu", "==ERROR== the driver is too old", code=1)
    check = toolchain.program_check("ncu", str(tmp_path))
    assert check.status == "warning" and check.detail == f"{tmp_path / 'ncu'} does not answer `ncu --version`"


def test_the_doctor_command_prints_the_tools_in_its_json_and_table(tmp_path):
    program(tmp_path, "ncu", "Version 2025.1.1.0")
    run = run_cli("doctor", env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, timeout=280)
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    tools = {tool["name"]: tool for tool in document["tools"]}
    assert list(tools) == ["torch", "triton", "tlx", "proton", "cuda_device", "ncu", "codex", "claude"]
    assert tools["ncu"]["status"] == "ok" and tools["codex"]["status"] == "missing"
    assert document["worker_python"] == sys.executable
    table = run.stderr[run.stderr.index("tools:"):]
    assert textwrap.dedent(f"  ncu          ok       {tmp_path / 'ncu'}: Version 2025.1.1.0") in table
    assert "fix: npm install -g @openai/codex" in table
