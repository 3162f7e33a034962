"""Ending a child and everything it started: process group, snapshot of descendants, token sweep.

The one process-ending implementation: `end_process_group` (SIGTERM, grace, SIGKILL to a child started
with its own session, plus a snapshot of its descendants) serves the codex provider
(orchestrator/providers/codex.py) and the worker's `kill_tree`. A candidate may setsid() or double-fork
to escape its process group, so before signalling we snapshot the child's descendants, and `kill_tree`
afterwards sweeps for any process still carrying the worker's environment token. Every wait is bounded:
a process stuck in D state (GPU driver teardown) must not hang us.

A worker whose `processes` isolation layer is active lives in a PID namespace of its own
(sandbox_worker/isolation/pidns.py): its pid 1 and the keeper above it never run candidate code, keep the
environment the worker was started with and stay in the worker's process group, so everything in that
namespace is found through them even after an `execve` with an empty environment (`worker_processes`).
`find_leftovers` / `end_leftovers` look for what is left of finished evaluations before the next one measures.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass

import psutil
import trio

PR_SET_CHILD_SUBREAPER = 36
SWEEP_ROUNDS = 20
TOKEN_VARIABLE = "TLX_WORKER_TOKEN"
SCRATCH_VARIABLE = "TLX_WORKER_SCRATCH"
LEFTOVER_WAIT_SECONDS = 2.0


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
            if proc.environ().get(TOKEN_VARIABLE) == token:
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
    """SIGTERM, grace, SIGKILL the worker's group and snapshot, then sweep by token. Returns the escapees killed:
    processes of the worker outside its process group (setsid), in its PID namespace or carrying its token.

    Call inside a shielded cancel scope; it bounds its own waits.
    """
    pgid = process.pid
    members = group_members(pgid)
    # Counted before any signal: ending the group ends the worker's PID namespace, and with it these.
    escaped = [found for found in worker_processes(lambda env: "worker" if env.get(TOKEN_VARIABLE) == token else None)
               if _process_group(found.pid) not in (pgid, None)]
    snapshot = await end_process_group(process, grace_seconds=grace_seconds, kill_seconds=max(grace_seconds, 2.0))
    for found in escaped:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(found.pid, signal.SIGKILL)
    escapees = await _sweep_token(token)
    pids = sorted(({proc.pid for proc in snapshot + escapees + members} | {found.pid for found in escaped})
                  - {process.pid})  # the worker itself is trio's to reap
    with trio.move_on_after(1.0):
        for _ in range(20):
            # the keeper and pid 1 of a worker's namespace re-parent to us (subreaper) once the worker has exited
            _reap(pids + _zombie_children_in_group(pgid, exclude=process.pid))
            if not any(_alive_pid(pid) for pid in pids):
                break
            await trio.sleep(0.05)
    return len({proc.pid for proc in escapees} | {found.pid for found in escaped})


def _process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _alive_pid(pid: int) -> bool:
    try:
        return is_alive(psutil.Process(pid))
    except psutil.Error:
        return False


def _zombie_children_in_group(pgid: int, *, exclude: int) -> list[int]:
    """Our exited, unreaped children in process group `pgid` (never `exclude`, which trio reaps itself)."""
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return []
    zombies = []
    for child in children:
        with suppress(psutil.Error):
            if child.pid != exclude and child.status() == psutil.STATUS_ZOMBIE and _process_group(child.pid) == pgid:
                zombies.append(child.pid)
    return zombies


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


# ---- what is left of finished evaluations ------------------------------------------------------------


@dataclass(frozen=True)
class Leftover:
    """A live process that belongs to a worker: its pid, command line and which evaluation it came from."""

    pid: int
    command: str
    evaluation: str
    pid_namespace: int | None

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command or 'no command line'}) from evaluation {self.evaluation}"


def pid_namespace(pid: int | str) -> int | None:
    """The inode of a process's PID namespace (what /proc/<pid>/ns/pid names), None when it cannot be read."""
    try:
        link = os.readlink(f"/proc/{pid}/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None
    return int(link[link.index("[") + 1 : link.index("]")])


def _command(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())[:200] or f"[{proc.name()}]"
    except psutil.Error:
        return ""


def worker_processes(label_of: Callable[[dict[str, str]], str | None]) -> list[Leftover]:
    """Live processes that belong to workers, each with the label `label_of` gives its worker's environment.

    A process belongs to a worker when its own environment is labelled, or when it lives in a PID namespace
    other than ours and an ancestor up to and including the first one in our namespace is labelled: inside a
    worker's namespace every parent chain leads to its pid 1, whose parent is the keeper. A candidate can
    empty its own environment, never theirs. Environments the kernel will not show (another user's
    processes) label nothing.
    """
    own = os.getpid()
    own_namespace = pid_namespace("self")
    entries: dict[int, tuple[psutil.Process, int | None, int | None]] = {}
    labels: dict[int, str] = {}
    for proc in psutil.process_iter():
        if proc.pid == own:
            continue
        try:
            parent = proc.ppid()
        except psutil.Error:
            parent = None
        entries[proc.pid] = (proc, pid_namespace(proc.pid), parent)
        with suppress(psutil.Error):
            label = label_of(proc.environ())
            if label is not None:
                labels[proc.pid] = label

    def label_for(pid: int | None) -> str | None:
        for _ in range(64):  # nesting depth is bounded by the kernel (32 PID namespaces); this bounds a cycle
            if pid is None:
                return None
            if pid in labels:
                return labels[pid]
            entry = entries.get(pid)
            if entry is None or entry[1] is None or entry[1] == own_namespace:
                return None
            pid = entry[2]
        return None

    found = []
    for pid, (proc, namespace, _parent) in entries.items():
        label = label_for(pid)
        if label is not None and is_alive(proc):
            found.append(Leftover(pid=pid, command=_command(proc), evaluation=label, pid_namespace=namespace))
    return found


def find_leftovers(workers: Mapping[str, str]) -> list[Leftover]:
    """Live processes of the workers whose scratch directory (TLX_WORKER_SCRATCH) is a key of `workers`,
    labelled with its value (the evaluation)."""
    return worker_processes(lambda env: workers.get(env.get(SCRATCH_VARIABLE, "")))


async def end_leftovers(workers: Mapping[str, str], *, wait_seconds: float = LEFTOVER_WAIT_SECONDS
                        ) -> tuple[list[Leftover], list[Leftover]]:
    """SIGKILL, by pid, every live process of the given finished workers; look again until none is left or
    `wait_seconds` have passed. Returns (what was found first, what is still alive at the end)."""
    if not workers:
        return [], []
    found = find_leftovers(workers)
    alive = found
    with trio.move_on_after(wait_seconds):
        while alive:
            for leftover in alive:
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(leftover.pid, signal.SIGKILL)
            await trio.sleep(0.05)
            _reap([leftover.pid for leftover in alive])
            alive = find_leftovers(workers)
    return found, alive
