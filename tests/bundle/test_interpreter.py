"""The workers' Triton against the orchestrator's: read from a real child interpreter (a package laid out as Meta's
fbtriton wheel lays itself out), compared, and a difference stops the run before the baseline with one line."""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.bundle.arch import run_probe
from orchestrator.bundle.interpreter import triton_facts, triton_mismatch
from protocol.bundle import Target
from tests.cli.test_doctor_tools import fbtriton_layout

TARGET = Target(backend="cpu", architecture="interpreter")


def _worker_python(tmp_path: Path, site: Path) -> str:
    """An interpreter whose own site holds `site` first, as a venv with fbtriton installed would."""
    script = tmp_path / "python-with-fbtriton"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def test_the_worker_interpreters_triton_is_read_as_the_orchestrators_own_is():
    own = triton_facts()
    probe = run_probe(sys.executable, TARGET, {"PATH": "/usr/bin:/bin"})
    assert own is not None and probe["triton"] == own
    assert triton_mismatch(own, probe["triton"], sys.executable) is None


def test_a_worker_with_another_triton_build_stops_the_run_naming_both(tmp_path):
    python = _worker_python(tmp_path, fbtriton_layout(tmp_path / "site"))
    worker = run_probe(python, TARGET, {"PATH": "/usr/bin:/bin"})["triton"]
    assert (worker["distribution"], worker["version"], worker["tlx"]) == ("fbtriton", "3.7.4", True)
    own = triton_facts()
    problem = triton_mismatch(own, worker, python)
    assert problem is not None
    assert problem.startswith(f"the workers' interpreter {python} imports fbtriton 3.7.4 at ")
    assert f"with TLX, but this environment has {own['distribution']} {own['version']}" in problem
    assert "without TLX" in problem and "scripts/setup_env.sh --tlx" in problem and "--worker-python" in problem


def test_an_orchestrator_without_triton_or_an_unreadable_worker_is_not_compared():
    worker = {"distribution": "fbtriton", "version": "3.7.4", "path": "/x/triton", "tlx": True}
    assert triton_mismatch(None, worker, "python3") is None
    assert triton_mismatch(worker, {"error": "ImportError: no torch"}, "python3") is None
    assert triton_mismatch(worker, None, "python3") is None
