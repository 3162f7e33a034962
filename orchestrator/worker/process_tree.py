"""Ending a child and everything it started: process group, snapshot of descendants, token sweep.

The one process-ending implementation: `end_process_group` (SIGTERM, grace, SIGKILL to a child started
with its own session, plus a snapshot of its descendants) serves the codex provider
(orchestrator/providers/codex.py) and the worker's `kill_tree`. A candidate may setsid() or double-fork
to escape its process group, so before signalling we snapshot the child's descendants, and `kill_tree`
afterwards sweeps for any process still carrying the worker's environment token. Every wait is bounded:
a process stuck in D state (GPU driver teardown) must not hang us.
"""

from __future__ import annotations

import ctypes
import os
import signal
from contextlib import suppress

import psutil
import trio

PR_SET_CHILD_SUBREAPER = 36
SWEEP_ROUNDS = 20


def become_subreaper() -> bool:
    """Orphans of our workers re-parent to us instead of pid 1, so the sweep can find and reap them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def is_alive(process: psutil.Process) -> bool:
    """Running and not a zombie: a zombie has exited, only its exit status is left for its parent."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes still in the process group `pgid`."""
    members = []
    for candidate in psutil.process_iter():
        try:
            if os.getpgid(candidate.pid) == pgid and is_alive(candidate):
                members.append(candidate)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return members


def processes_with_token(token: str, exclude: set[int]) -> list[psutil.Process]:
    """Processes whose environment carries TLX_WORKER_TOKEN=token (escapees included)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in exclude:
            continue
        with suppress(psutil.Error):
            if proc.environ().get("TLX_WORKER_TOKEN") == token:
                found.append(proc)
    return found


def signal_group(pgid: int, snapshot: list[psutil.Process], sig: int) -> None:
    """`sig` to the process group and to every snapshot member (those that left the group with setsid)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for proc in snapshot:
        with suppress(psutil.Error):
            proc.send_signal(sig)


async def end_process_group(
    process: trio.Process, *, grace_seconds: float, kill_seconds: float | None = None
) -> list[psutil.Process]:
    """End a child started with `start_new_session=True` (its pgid is its pid) and all it started; bounded.

    SIGTERM to the group and a snapshot of the child's descendants, up to `grace_seconds` for the child to
    be reaped and every group or snapshot member to exit, then SIGKILL and up to `kill_seconds` (default
    `grace_seconds`) more. The snapshot is taken before any signal and only while the child is unreaped (its
    pid cannot have been reused): once it dies its orphans are re-parented and no longer show up as its
    children. Returns the snapshot, so a subreaper can reap what re-parented to it. Call it shielded.
    """
    pgid = process.pid
    snapshot = descendants(pgid) if process.returncode is None else []
    kill_seconds = grace_seconds if kill_seconds is None else kill_seconds
    for sig, seconds in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, kill_seconds)):
        signal_group(pgid, snapshot, sig)
        with trio.move_on_after(seconds):
            await process.wait()
            while group_members(pgid) or any(is_alive(member) for member in snapshot):
                await trio.sleep(0.05)
            break
    return snapshot


def _reap(pids: list[int]) -> None:
    """Reap zombies that re-parented to us (subreaper); never waitpid(-1), which would steal trio's children."""
    for pid in pids:
        with suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


async def kill_tree(process: trio.Process, token: str, *, grace_seconds: float = 1.0) -> int:
    """SIGTERM, grace, SIGKILL the worker's group and snapshot, then sweep by token. Returns escapees killed.

    Call inside a shielded cancel scope; it bounds its own waits.
    """
    snapshot = await end_process_group(process, grace_seconds=grace_seconds, kill_seconds=max(grace_seconds, 2.0))
    escapees = await _sweep_token(token)
    leftovers = snapshot + escapees
    if leftovers:
        with trio.move_on_after(1.0):
            for _ in range(20):
                _reap([proc.pid for proc in leftovers])
                if not any(is_alive(proc) for proc in leftovers):
                    break
                await trio.sleep(0.05)
    return len(escapees)


async def _sweep_token(token: str, *, rounds: int = SWEEP_ROUNDS, seconds: float = 2.0) -> list[psutil.Process]:
    """SIGKILL every process carrying the token, again and again until none is left (bounded): an escapee
    that keeps forking creates new carriers while a single pass over the process table is running."""
    killed: dict[int, psutil.Process] = {}
    with trio.move_on_after(seconds):
        for _ in range(rounds):
            carriers = processes_with_token(token, exclude={os.getpid()})
            if not carriers:
                break
            for proc in carriers:
                with suppress(psutil.Error):
                    proc.kill()
                killed.setdefault(proc.pid, proc)
            await trio.sleep(0.02)
    return list(killed.values())
