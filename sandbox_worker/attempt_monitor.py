"""What the candidate attempted outside its sandbox: writes outside the writable directories and
network connections, recorded from audit hooks and reported as a `sandbox_violation` failure event.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from sandbox_worker.failures import clip

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# audit event -> positions of (path, dir_fd) pairs in its arguments (dir_fd position None: no dir_fd)
PATH_EVENTS: dict[str, tuple[tuple[int, int | None], ...]] = {
    "os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),), "os.truncate": ((0, None),),
    "os.chmod": ((0, 2),), "os.chown": ((0, 3),), "os.utime": ((0, 3),), "shutil.rmtree": ((0, 1),),
    "os.rename": ((0, 2), (1, 3)), "os.link": ((1, 3),), "os.symlink": ((1, 2),),
}
NETWORK_EVENTS = frozenset({"socket.connect", "socket.sendto"})
WATCHED_EVENTS = frozenset({"open", *PATH_EVENTS, *NETWORK_EVENTS})
MAX_ATTEMPTS = 20


class AttemptMonitor:
    """Names what the candidate tried to do outside its sandbox, from audit hooks (PEP 578).

    Landlock and the network namespace are what block; this only records, so an attempt counts even when
    the candidate swallows the PermissionError (or, with a degraded layer, when it succeeded). Writes are
    allowed where Landlock allows them: the writable dirs, /dev and this process's /proc entry. It runs
    in the candidate's process, so it is telemetry a determined candidate can blind, not a barrier.
    """

    def __init__(self, writable_dirs: list[str]) -> None:
        own_proc = (os.path.realpath("/proc/self"), "/proc/self", "/proc/thread-self")
        self.allowed = tuple(os.path.realpath(d) for d in writable_dirs) + ("/dev", *own_proc)
        self.attempts: list[str] = []
        self.reported = 0
        self._busy = False

    def install(self) -> None:
        sys.addaudithook(self.hook)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in WATCHED_EVENTS or self._busy or len(self.attempts) >= MAX_ATTEMPTS:
            return
        self._busy = True  # realpath and readlink below must not re-enter
        try:
            attempt = self._describe(event, args)
            if attempt and attempt not in self.attempts:
                self.attempts.append(attempt)
        except Exception:  # noqa: BLE001 - a monitoring bug must never break the operation it watches
            pass
        finally:
            self._busy = False

    def _describe(self, event: str, args: tuple[Any, ...]) -> str | None:
        if event in NETWORK_EVENTS:
            sock, address = args[0], args[1]
            if getattr(sock, "family", None) in (socket.AF_INET, socket.AF_INET6):
                host, port = address[0], address[1]
                return f"network connection to {host}:{port}"
            return None
        if event == "open":
            path, _mode, flags = args
            if not isinstance(flags, int) or not flags & WRITE_FLAGS:
                return None
            outside = self._outside(path, None)
            return f"open for writing {outside}" if outside else None
        for path_index, dir_fd_index in PATH_EVENTS[event]:
            dir_fd = args[dir_fd_index] if dir_fd_index is not None else None
            outside = self._outside(args[path_index], dir_fd)
            if outside and not (event == "os.mkdir" and os.path.isdir(outside)):
                return f"{event.split('.')[-1]} {outside}"
        return None

    def _outside(self, path: Any, dir_fd: Any) -> str | None:
        """The resolved path when it lies outside every allowed directory, else None."""
        if isinstance(path, int) or path is None:
            return None
        name = os.fsdecode(path)
        if not os.path.isabs(name) and isinstance(dir_fd, int):
            name = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
        resolved = os.path.realpath(name)
        if any(resolved == root or resolved.startswith(root.rstrip("/") + "/") for root in self.allowed):
            return None
        return resolved

    def new_attempts(self) -> list[str]:
        fresh = self.attempts[self.reported:]
        self.reported = len(self.attempts)
        return fresh


def violation_event(command_id: int, phase: str, attempts: list[str]) -> dict[str, Any]:
    more = f" (+{len(attempts) - 3} more)" if len(attempts) > 3 else ""
    return {
        "kind": "failure",
        "command_id": command_id,
        "phase": phase,
        "error_type": "SandboxViolation",
        "message": clip("attempted " + "; ".join(attempts[:3]) + more),
        "traceback": "",
        "category": "sandbox_violation",
    }
