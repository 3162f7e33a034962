"""Ending a worker and everything it started: process group, snapshot of descendants, token sweep.

A candidate may setsid() or double-fork to escape its process group, so before killing we snapshot the
worker's descendants, and afterwards sweep for any process still carrying the worker's environment
token. Every wait is bounded: a process stuck in D state (GPU driver teardown) must not hang us.
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


def _signal_all(pgid: int, processes: list[psutil.Process], sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for proc in processes:
        with suppress(psutil.Error):
            proc.send_signal(sig)


def _reap(pids: list[int]) -> None:
    """Reap zombies that re-parented to us (subreaper); never waitpid(-1), which would steal trio's children."""
    for pid in pids:
        with suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


async def kill_tree(process: trio.Process, token: str, *, grace_seconds: float = 1.0) -> int:
    """SIGTERM, grace, SIGKILL the worker's group and snapshot, then sweep by token. Returns escapees killed.

    Call inside a shielded cancel scope; it bounds its own waits.
    """
    snapshot = descendants(process.pid)
    if process.returncode is None:
        _signal_all(process.pid, snapshot, signal.SIGTERM)
        with trio.move_on_after(grace_seconds):
            await process.wait()
    _signal_all(process.pid, snapshot, signal.SIGKILL)
    with trio.move_on_after(max(grace_seconds, 2.0)):
        await process.wait()
    escapees = await _sweep_token(token)
    leftovers = [p.pid for p in snapshot] + escapees
    if leftovers:
        with trio.move_on_after(1.0):
            for _ in range(20):
                _reap(leftovers)
                if not any(psutil.pid_exists(pid) and _is_alive(pid) for pid in leftovers):
                    break
                await trio.sleep(0.05)
    return len(escapees)


async def _sweep_token(token: str, *, rounds: int = SWEEP_ROUNDS, seconds: float = 2.0) -> list[int]:
    """SIGKILL every process carrying the token, again and again until none is left (bounded): an escapee
    that keeps forking creates new carriers while a single pass over the process table is running."""
    killed: list[int] = []
    with trio.move_on_after(seconds):
        for _ in range(rounds):
            carriers = processes_with_token(token, exclude={os.getpid()})
            if not carriers:
                break
            for proc in carriers:
                with suppress(psutil.Error):
                    proc.kill()
                if proc.pid not in killed:
                    killed.append(proc.pid)
            await trio.sleep(0.02)
    return killed


def _is_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
