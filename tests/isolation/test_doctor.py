"""`tlx-agent doctor`'s isolation probe: a real child applies the layers and then tries to break them."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from orchestrator.worker import doctor

LAYERS = ("stdin", "rlimits", "network", "processes", "filesystem", "seccomp")


def test_probe_report_on_this_machine() -> None:
    report = trio.run(doctor.run_probe, sys.executable, "standard")
    print("\n" + doctor.format_doctor_report(report.layers, report.checks))  # visible with -s
    assert tuple(report.layers) == LAYERS
    assert report.layers["stdin"] == "active"
    assert report.layers["rlimits"] == "active"
    assert "private mapping above DATA refused (ENOMEM)" in report.checks["rlimits"]
    if report.layers["network"] == "active":
        assert any(note.startswith("connect to parent's 127.0.0.1:") for note in report.checks["network"])
    if report.layers["filesystem"] == "active":
        assert "create outside: EACCES" in report.checks["filesystem"]
        assert "rename across writable dirs works (Triton cache)" in report.checks["filesystem"]
    if report.layers["seccomp"] == "active":
        assert "ptrace(PEEKDATA, 0): EPERM" in report.checks["seccomp"]
    if report.layers["processes"] == "active":
        assert any(note.endswith(": ESRCH") and note.startswith("kill(parent, 0), setpriority(parent)")
                   for note in report.checks["processes"]), report.checks["processes"]
        assert "orphans are reaped; a subprocess's exit status arrives" in report.checks["processes"]
    if report.landlock_abi is not None and report.landlock_abi >= 3:
        # The machines we target (Firecracker VMs, kernel 6.x, root): everything must work here.
        assert report.layers == dict.fromkeys(LAYERS, "active"), report


def test_probe_catches_layers_that_do_not_confine() -> None:
    """In `off` mode nothing is applied; the probe's own checks must notice every escape."""
    report = trio.run(doctor.run_probe, sys.executable, "off")
    assert report.layers == dict.fromkeys(LAYERS, "unavailable:isolation off")
    assert any(note.startswith("FAILED: connected to the parent's listener") for note in report.checks["network"])
    assert any("outside the writable dirs" in note for note in report.checks["filesystem"])
    assert any(note.startswith("FAILED: RLIMIT_") for note in report.checks["rlimits"])
    assert any(note.startswith("FAILED: ptrace") for note in report.checks["seccomp"])
    assert any(note.startswith("FAILED: kill(parent, 0) on pid") and note.endswith("gave success, expected ESRCH")
               for note in report.checks["processes"]), report.checks["processes"]


def test_probe_with_a_missing_interpreter_reports_every_layer_unavailable() -> None:
    statuses = doctor.probe_isolation_sync("/nonexistent/python3", "standard")
    assert set(statuses) == set(LAYERS)
    assert all(s.startswith("unavailable:probe failed: cannot start /nonexistent/python3") for s in statuses.values())


def test_unreadable_probe_output_is_a_failed_probe() -> None:
    assert doctor.parse_probe_output(b"").layers["network"] == "unavailable:probe failed: no report on stdout"
    garbled = doctor.parse_probe_output(b'{"layers": {"stdin": "active"}}\n')
    assert garbled.layers["seccomp"].startswith("unavailable:probe failed: unreadable report (KeyError")


def test_format_doctor_report_aligns_layers_and_gives_the_strict_verdict() -> None:
    statuses = {"stdin": "active", "network": "degraded:seccomp inet deny (unshare failed: EPERM)",
                "filesystem": "unavailable:landlock ABI not supported (errno 38: Function not implemented)"}
    text = doctor.format_doctor_report(statuses, {"stdin": ["fd 0 is /dev/null"]})
    lines = text.splitlines()
    assert lines[0] == "isolation layers:"
    assert lines[1] == "  stdin       active"
    assert lines[2].strip() == "- fd 0 is /dev/null"
    assert lines[3] == "  network     degraded     seccomp inet deny (unshare failed: EPERM)"
    assert lines[4].startswith("  filesystem  unavailable  landlock ABI not supported")
    assert lines[-1] == "strict mode: would refuse to run (network, filesystem not active)"
    assert doctor.format_doctor_report({"stdin": "active"}).endswith("strict mode: ok (every layer active)")


def test_the_probe_child_starts_with_a_worker_environment(tmp_path, monkeypatch) -> None:
    """One allow-list (orchestrator/worker/environment.py): secrets stay behind, HOME is the probe's scratch."""
    seen = tmp_path / "environment.txt"
    python = tmp_path / "python"  # a real interpreter behind a wrapper that records what it was given
    python.write_text(f'#!/bin/sh\nenv > "{seen}"\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    monkeypatch.setenv("TLX_DOCTOR_TEST_API_KEY", "must-not-leak")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    report = trio.run(doctor.run_probe, str(python), "off")
    assert report.layers == dict.fromkeys(LAYERS, "unavailable:isolation off")
    environment = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert "TLX_DOCTOR_TEST_API_KEY" not in environment and environment["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    scratch = environment["TLX_WORKER_SCRATCH"]
    assert environment["HOME"] == f"{scratch}/home" and environment["TRITON_CACHE_DIR"] == f"{scratch}/triton_cache"
    assert environment["PYTHONPATH"] == str(Path(doctor.__file__).resolve().parents[2])
