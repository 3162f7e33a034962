"""scripts/setup_env.sh's arguments and its refusal to put Meta's Triton (fbtriton, CPython 3.12 wheels only) under
another Python. Each test runs the real script from a copy in a temporary root, so nothing is installed and the
checkout's .venv is never touched; every refusal happens before the script creates or installs anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "setup_env.sh"
NOT_312 = sys.version_info[:2] != (3, 12)
VERSION = ".".join(map(str, sys.version_info[:3]))


def setup_env(root: Path, *args: str, python: str | None = None) -> subprocess.CompletedProcess[str]:
    (root / "scripts").mkdir(parents=True, exist_ok=True)
    shutil.copy2(SCRIPT, root / "scripts" / "setup_env.sh")
    env = {**os.environ, **({"PYTHON": python} if python else {})}
    return subprocess.run(["bash", str(root / "scripts" / "setup_env.sh"), *args], capture_output=True, text=True,
                          timeout=60, env=env, stdin=subprocess.DEVNULL)


def untouched(root: Path) -> bool:
    return sorted(p.name for p in root.iterdir()) == ["scripts"]


@pytest.mark.parametrize("args, message", [
    (["--bogus"], "[setup] error: unknown argument '--bogus'"),
    (["--tlx-version"], "[setup] error: --tlx-version needs a value"),
    (["--tlx-wheel", "--tlx"], "[setup] error: --tlx-wheel needs a value"),
])
def test_bad_arguments_are_refused_with_the_usage(tmp_path, args, message):
    done = setup_env(tmp_path, *args)
    assert done.returncode == 2 and done.stderr.startswith(message + "\n")
    assert "scripts/setup_env.sh --tlx " in done.stderr and untouched(tmp_path)


def test_help_prints_the_usage(tmp_path):
    done = setup_env(tmp_path, "--help")
    assert done.returncode == 0 and done.stdout.splitlines()[1].startswith("scripts/setup_env.sh --tlx ")
    assert "fbtriton" in done.stdout and untouched(tmp_path)


def test_a_missing_wheel_is_named(tmp_path):
    done = setup_env(tmp_path, "--tlx-wheel", str(tmp_path / "nothing.whl"))
    assert done.returncode == 1
    assert done.stderr == (f"[setup] error: --tlx-wheel {tmp_path / 'nothing.whl'} does not exist; pass the path of "
                           "an fbtriton .whl\n")


@pytest.mark.skipif(not NOT_312, reason="the refusal needs an interpreter other than CPython 3.12")
def test_tlx_refuses_to_create_a_venv_with_another_python(tmp_path):
    done = setup_env(tmp_path, "--tlx", python=sys.executable)
    assert done.returncode == 1 and untouched(tmp_path)
    assert done.stderr == (f"[setup] error: Meta's Triton with TLX (fbtriton) is published for CPython 3.12 only, and "
                           f"{sys.executable} runs Python {VERSION}: run PYTHON=python3.12 scripts/setup_env.sh --tlx "
                           "(any CPython 3.12 interpreter)\n")


@pytest.mark.skipif(not NOT_312, reason="the refusal needs an interpreter other than CPython 3.12")
def test_tlx_refuses_an_existing_venv_of_another_python(tmp_path):
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    done = setup_env(tmp_path, "--tlx")
    assert done.returncode == 1
    assert done.stderr == (f"[setup] error: Meta's Triton with TLX (fbtriton) is published for CPython 3.12 only, and "
                           f".venv runs Python {VERSION}: remove .venv, then run PYTHON=python3.12 "
                           "scripts/setup_env.sh --tlx\n")
    assert sorted(p.name for p in (tmp_path / ".venv").rglob("*")) == ["bin", "python"]  # nothing installed
