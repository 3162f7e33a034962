"""`tlx-agent doctor`: which isolation layers actually work on this machine, for this worker Python.

The answer comes from a real child (`python -m sandbox_worker.isolation.probe`) started the way a worker is
(new session, stdin /dev/null, scrubbed environment, its own scratch), because whether user namespaces,
Landlock or seccomp work depends on the kernel, the container runtime and the interpreter, not on this
process. The parent opens a TCP listener in its own network namespace and a directory outside the
scratch, and the probe must fail to reach either.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from orchestrator.worker.environment import build_worker_environment, make_scratch_dirs
from sandbox_worker.isolation.netns import listen_on_loopback

LAYERS = ("stdin", "rlimits", "network", "processes", "filesystem", "seccomp")
PROBE_MODULE = "sandbox_worker.isolation.probe"
PROBE_TIMEOUT_SECONDS = 60.0
_STDERR_TAIL = 2000


@dataclass(frozen=True)
class ProbeReport:
    """Final per-layer statuses, what `apply_layers` claimed before the checks, and the check notes."""

    layers: dict[str, str]
    applied: dict[str, str] = field(default_factory=dict)
    checks: dict[str, list[str]] = field(default_factory=dict)
    landlock_abi: int | None = None


def _failed(reason: str) -> ProbeReport:
    return ProbeReport(layers=dict.fromkeys(LAYERS, f"unavailable:probe failed: {reason}"))


def _absolute_python(python: str) -> str:
    """The probe runs with cwd=scratch, so a relative interpreter path must be pinned first (no symlink
    resolution: a venv's python finds its site-packages through its own path)."""
    if os.sep in python:
        return os.path.abspath(python)
    return shutil.which(python) or python


def probe_command(python: str, mode: str, scratch: Path, outside: Path, port: int | None) -> list[str]:
    command = [_absolute_python(python), "-m", PROBE_MODULE, "--mode", mode, "--scratch", str(scratch),
               "--writable", str(scratch / "triton_cache"), "--writable", str(scratch / "tmp"),
               "--writable", str(scratch / "home"), "--outside", str(outside)]
    if port is not None:
        command += ["--port", str(port)]
    return command


def parse_probe_output(stdout: bytes) -> ProbeReport:
    """The probe's last stdout line is its JSON report; anything else is a failed probe."""
    lines = [line for line in stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    if not lines:
        return _failed("no report on stdout")
    try:
        data: Any = json.loads(lines[-1])
        layers = {name: str(data["layers"][name]) for name in LAYERS}
    except (ValueError, KeyError, TypeError) as exc:
        return _failed(f"unreadable report ({type(exc).__name__}: {exc})")
    abi = data.get("landlock_abi")
    return ProbeReport(
        layers=layers,
        applied={str(k): str(v) for k, v in (data.get("applied") or {}).items()},
        checks={str(k): [str(n) for n in v] for k, v in (data.get("checks") or {}).items()},
        landlock_abi=abi if isinstance(abi, int) else None,
    )


async def run_probe(python: str, mode: str, *, timeout: float = PROBE_TIMEOUT_SECONDS) -> ProbeReport:
    """Start the probe child, wait for its report (bounded), and return it; never raises for probe trouble."""
    with tempfile.TemporaryDirectory(prefix="tlx-doctor-") as root:
        scratch, outside = Path(root) / "scratch", Path(root) / "outside"
        for directory in (scratch, outside):
            directory.mkdir(mode=0o700)
        make_scratch_dirs(scratch)
        # a worker's environment (one allow-list), without a target's: the probe runs no bundle
        environment, _refused = build_worker_environment(os.environ, scratch=scratch, token="doctor-probe")
        (outside / "existing.txt").write_text("must stay untouched\n")
        listener = listen_on_loopback(backlog=8)
        port = listener.getsockname()[1] if listener else None
        try:
            with trio.move_on_after(timeout) as scope:
                completed = await trio.run_process(
                    probe_command(python, mode, scratch, outside, port),
                    stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True, check=False,
                    env=environment, cwd=str(scratch), start_new_session=True,
                )
        except OSError as exc:
            return _failed(f"cannot start {python}: {exc.strerror or exc}")
        finally:
            if listener is not None:
                listener.close()
        if scope.cancelled_caught:
            return _failed(f"no answer within {timeout:.0f} s")
        report = parse_probe_output(completed.stdout)
        if completed.returncode != 0 and not report.applied:
            tail = completed.stderr.decode("utf-8", "replace")[-_STDERR_TAIL:].strip()
            return _failed(f"exit status {completed.returncode}: {tail.splitlines()[-1] if tail else 'no stderr'}")
        if (outside / "existing.txt").read_text() != "must stay untouched\n":
            layers = dict(report.layers)
            if layers["filesystem"] == "active":
                layers["filesystem"] = "unavailable:verification failed: a file outside scratch was modified"
            return ProbeReport(layers, report.applied, report.checks, report.landlock_abi)
        return report


async def probe_isolation(python: str, mode: str) -> dict[str, str]:
    """Per layer `active` / `degraded:<reason>` / `unavailable:<reason>`, as measured by a real probe child."""
    return (await run_probe(python, mode)).layers


def probe_isolation_sync(python: str, mode: str) -> dict[str, str]:
    """For callers outside trio (tests, scripts)."""
    return trio.run(probe_isolation, python, mode)


def strict_refusals(statuses: dict[str, str]) -> list[str]:
    """Layers that would make a `--isolation strict` run refuse to start."""
    return [name for name, status in statuses.items() if status != "active"]


def format_doctor_report(statuses: dict[str, str], checks: dict[str, list[str]] | None = None) -> str:
    """Aligned `layer  state  reason` lines plus the strict-mode verdict; with `checks`, the evidence too."""
    width = max((len(name) for name in statuses), default=0)
    lines = ["isolation layers:"]
    for name, status in statuses.items():
        state, _, reason = status.partition(":")
        lines.append(f"  {name:<{width}}  {state:<11}  {reason}".rstrip())
        for note in (checks or {}).get(name, []):
            lines.append(f"  {'':<{width}}  {'':<11}  - {note}")
    refusals = strict_refusals(statuses)
    verdict = "ok (every layer active)" if not refusals else f"would refuse to run ({', '.join(refusals)} not active)"
    lines.append(f"strict mode: {verdict}")
    return "\n".join(lines)
