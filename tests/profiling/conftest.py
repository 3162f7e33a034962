"""Shared helpers for the profiling tests: fixture paths and fake `ncu` executables on PATH."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install an executable named `ncu` (a Python script) first on PATH; returns a factory.

    The script body receives `argv` (list) and `log` (a path where every invocation's argv is appended
    as one line), so tests can both fake ncu's behaviour and assert on the command it was given.
    """

    def install(body: str) -> Path:
        directory = tmp_path / "fakebin"
        directory.mkdir(exist_ok=True)
        log = tmp_path / "ncu_calls.log"
        script = directory / "ncu"
        script.write_text(
            f"#!{sys.executable}\n"
            "import json, shutil, sys, time\n"
            "argv = sys.argv[1:]\n"
            f"log = {str(log)!r}\n"
            "open(log, 'a').write(json.dumps(argv) + '\\n')\n" + body,
            encoding="utf-8",
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ.get('PATH', '')}")
        return log

    return install
