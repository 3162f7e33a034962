"""Isolation layers the worker applies to itself before the harness or the candidate is imported.

Each layer reports `active`, `degraded:<reason>` or `unavailable:<reason>`; `apply_layers` never
raises, so a kernel without Landlock or user namespaces still runs (mode `standard`), and the
orchestrator can refuse the run instead when it demands every layer (mode `strict`). Order matters:
the namespaces need a single-threaded process, so they come before anything that could start threads
(torch), and before seccomp forbids `unshare`; the PID namespace (`processes`, sandbox_worker/isolation/pidns.py)
forks, so every later layer is applied in the process that goes on to run the harness; Landlock comes after
the uid/gid maps are written and after /proc is the namespace's own.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any

from sandbox_worker.isolation import landlock, netns, pidns, procfs, rlimits, seccomp

LAYERS = ("stdin", "rlimits", "network", "processes", "filesystem", "seccomp")
OFF = "unavailable:isolation off"


def _clip(reason: str, limit: int = 300) -> str:
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."


def check_stdin() -> str:
    """The orchestrator opens stdin on /dev/null; the worker only confirms it (the candidate gets no input)."""
    try:
        info = os.fstat(0)
    except OSError:
        return "degraded:stdin is closed (fd 0 may be reused by the next open)"
    try:
        null = os.stat("/dev/null")
    except OSError as exc:
        return f"degraded:cannot stat /dev/null ({exc.strerror})"
    if stat.S_ISCHR(info.st_mode) and info.st_rdev == null.st_rdev:
        return "active"
    kind = "a tty" if os.isatty(0) else "a pipe" if stat.S_ISFIFO(info.st_mode) else "not /dev/null"
    return f"degraded:stdin is {kind}"


def isolate_network(config: dict[str, Any]) -> str:
    """A private network namespace, else a seccomp deny of inet sockets."""
    if config.get("network"):
        return "unavailable:network allowed by configuration"
    try:
        netns.enter_private_network()
        return "active"
    except OSError as exc:
        failure = str(exc)
    try:
        seccomp.deny_inet_sockets()
    except OSError as exc:
        return _clip(f"unavailable:unshare failed: {failure}; seccomp inet deny failed: {exc}")
    return _clip(f"degraded:seccomp inet deny (unshare failed: {failure})")


def writable_dirs(config: dict[str, Any]) -> list[str]:
    """Scratch plus the configured writable dirs (Triton cache, tmp), absolute, de-duplicated, in order."""
    dirs = [config["scratch_dir"], *config.get("writable_dirs", [])]
    unique: list[str] = []
    for directory in dirs:
        path = os.path.abspath(directory)
        if path not in unique:
            unique.append(path)
    return unique


def confine_writes(config: dict[str, Any]) -> str:
    """Landlock write confinement; a missing writable dir is created first so the rule can name it."""
    problem = netns.single_threaded_problem()
    dirs = writable_dirs(config)
    notes: list[str] = []
    usable: list[str] = []
    for directory in dirs:
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            usable.append(directory)
        except OSError as exc:
            notes.append(f"{directory}: {exc.strerror}")
    proc_guarded = False
    if os.geteuid() == 0 and config.get("child_cuda", True):
        try:
            procfs.guard_proc_sys()
            proc_guarded = True
        except OSError as exc:
            notes.append(f"CUDA child processes (ncu) unavailable: /proc/sys not guarded ({exc.strerror or exc})")
    try:
        abi, rule_notes = landlock.restrict_writes(usable, proc_guarded=proc_guarded)
    except landlock.LandlockUnavailable as exc:
        return _clip(f"unavailable:{exc.strerror}")
    except OSError as exc:
        return _clip(f"unavailable:landlock failed ({exc})")
    notes += rule_notes + landlock.abi_shortcomings(abi)
    if problem:
        notes.append(f"other threads stay unconfined: {problem}")
    if notes:
        return _clip(f"degraded:landlock ABI {abi}: {'; '.join(notes)}")
    return "active"


def deny_escape_syscalls() -> str:
    try:
        seccomp.deny_escape_syscalls()
    except OSError as exc:
        return _clip(f"unavailable:seccomp filter not loaded ({exc})")
    return "active"


@dataclass
class AppliedIsolation:
    """Each layer's status, and the worker's PID namespace when the `processes` layer made one."""

    statuses: dict[str, str]
    pid_namespace: pidns.PidNamespace | None = None


def isolate_processes(applied: AppliedIsolation) -> str:
    """A PID namespace of its own; from here on this is the worker process inside it (pid 2)."""
    try:
        applied.pid_namespace = pidns.enter_private_pid_namespace()
    except OSError as exc:
        return _clip(f"unavailable:{exc.strerror or exc}")
    return "active"


def apply_isolation(config: dict[str, Any]) -> AppliedIsolation:
    """Apply every layer in order; never raises."""
    applied = AppliedIsolation(statuses={})
    if config.get("mode") == "off":
        applied.statuses = dict.fromkeys(LAYERS, OFF)
        return applied
    steps = {
        "stdin": check_stdin,
        "rlimits": lambda: rlimits.apply_rlimits(config),
        "network": lambda: isolate_network(config),
        "processes": lambda: isolate_processes(applied),
        "filesystem": lambda: confine_writes(config),
        "seccomp": deny_escape_syscalls,
    }
    for name in LAYERS:
        try:
            applied.statuses[name] = steps[name]()
        except Exception as exc:  # noqa: BLE001 - a layer's bug becomes its status, never a dead worker
            applied.statuses[name] = _clip(f"unavailable:internal error: {type(exc).__name__}: {exc}")
    return applied


def apply_layers(config: dict[str, Any]) -> dict[str, str]:
    """Apply every layer in order and return the status of each; never raises."""
    return apply_isolation(config).statuses
