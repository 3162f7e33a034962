"""The candidate process as the judge holds it: forked inside the sandbox, stopped outside its calls.

Why stopped: a candidate that runs between calls could finish a call's work after replying (deferred
work), or start on inputs the judge has just written before the clock starts. SIGSTOP after every reply
and SIGCONT inside the timed window leave it no time the judge does not measure. Every process in the
worker's own PID namespace except the judge and its init is the candidate's, so all of them are
stopped; without that layer, the candidate's descendants are (docs/security.md lists what that misses).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
import signal
import socket
import time
from typing import Any

from sandbox_worker.channel import Channel, ChannelClosed
from sandbox_worker.isolation import seccomp, syscalls
from sandbox_worker.judged.slots import reserve_arena

PR_SET_DUMPABLE = 4
PR_SET_PDEATHSIG = 1
STOP_WAIT_SECONDS = 2.0
EXIT_WAIT_SECONDS = 1.0


class CandidateDied(Exception):
    """The candidate process ended (a crash, an exit, or a closed channel)."""


class CandidateBrokeProtocol(Exception):
    """The candidate process sent something other than the reply to the request in flight."""


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"killed by {name}"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return f"ended (wait status {status})"


class CandidateProcess:
    def __init__(self, pid: int, channel: Channel, arena: mmap.mmap, own_pid_namespace: bool) -> None:
        self.pid = pid
        self.channel = channel
        self.arena = arena  # shared with the candidate process (mapped before the fork)
        self.own_pid_namespace = own_pid_namespace
        self.frozen: list[int] = []
        self.exit_description: str | None = None

    @classmethod
    def fork(cls, writable_dirs: list[str] | None, own_pid_namespace: bool) -> CandidateProcess:
        from sandbox_worker.judged import candidate

        judge_end, candidate_end = socket.socketpair()
        arena = reserve_arena()
        judge_pid, judge_pgid = os.getpid(), os.getpgid(0)
        pid = os.fork()
        if pid == 0:  # the candidate process: keep only its socket, the shared memory and stdout/stderr
            try:
                judge_end.close()
                _close_fds_except({0, 1, 2, candidate_end.fileno()})
                syscalls.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                if writable_dirs is not None:  # sandboxed: no signal reaches the judge from here on
                    seccomp.install(seccomp.judge_protection_rules(judge_pid, judge_pgid))
            except BaseException as exc:  # noqa: BLE001 - never return into the judge's code
                os.write(2, f"tlx-agent: the candidate process could not be set up: {exc}\n".encode()[:500])
                os._exit(4)
            candidate.run(candidate_end.detach(), arena, writable_dirs)
        candidate_end.close()
        # Non-dumpable: the candidate (same uid) can no longer open /proc/<judge>/mem, fd or environ.
        syscalls.prctl(PR_SET_DUMPABLE, 0)
        return cls(pid, Channel(judge_end), arena, own_pid_namespace)

    # ---- requests ------------------------------------------------------------------------------------

    def request(self, message: dict[str, Any], expected: tuple[str, ...]) -> tuple[dict[str, Any], int]:
        """Thaw, send, wait for the reply, freeze; returns (reply, nanoseconds from thaw to reply)."""
        nonce = secrets.randbits(62)
        started = time.perf_counter_ns()
        self.thaw()
        try:
            self.channel.send({**message, "nonce": nonce})
            reply = self.channel.receive()
        except (ValueError, RecursionError) as exc:  # not JSON, too deeply nested, or over the line limit
            self.freeze()
            raise CandidateBrokeProtocol(f"unreadable reply: {str(exc)[:200]}") from None
        except (ChannelClosed, OSError):
            raise CandidateDied(self._reap()) from None
        elapsed = time.perf_counter_ns() - started
        self.freeze()
        if reply.get("kind") not in expected or (reply.get("kind") in ("called", "recorded", "raised")
                                                  and reply.get("nonce") != nonce):
            raise CandidateBrokeProtocol(
                f"expected {'/'.join(expected)} for the request in flight, got {str(reply.get('kind'))[:40]!r}"
                + (" with another nonce (a forged or stale reply)" if "nonce" in reply else ""))
        return reply, elapsed

    # ---- stopping and resuming ---------------------------------------------------------------------

    def freeze(self) -> None:
        """SIGSTOP the candidate and every process it may have started; return once all are stopped."""
        pids = [self.pid, *self._other_pids()]
        for pid in pids:
            _signal(pid, signal.SIGSTOP)
        self.frozen = pids
        try:
            _, status = os.waitpid(self.pid, os.WUNTRACED)
        except ChildProcessError:
            raise CandidateDied(self.exit_description or "ended") from None
        if not os.WIFSTOPPED(status):
            self.exit_description = describe_status(status)
            raise CandidateDied(self.exit_description)
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        for pid in pids[1:]:
            while _state(pid) not in ("T", "t", "Z", "X", None) and time.monotonic() < deadline:
                time.sleep(0.0002)

    def thaw(self) -> None:
        for pid in self.frozen or [self.pid]:
            _signal(pid, signal.SIGCONT)
        self.frozen = []

    def _other_pids(self) -> list[int]:
        own = os.getpid()
        if self.own_pid_namespace:
            return [pid for pid in _all_pids() if pid not in (1, own, self.pid)]
        children: dict[int, list[int]] = {}
        for pid in _all_pids():
            parent = _parent(pid)
            if parent is not None:
                children.setdefault(parent, []).append(pid)
        found, queue = [], list(children.get(self.pid, []))
        while queue:
            pid = queue.pop()
            found.append(pid)
            queue.extend(children.get(pid, []))
        return found

    # ---- the end -------------------------------------------------------------------------------------

    def _reap(self) -> str:
        """Why the channel closed: the exit status, waiting briefly for a process that is exiting."""
        if self.exit_description is not None:
            return self.exit_description
        deadline = time.monotonic() + EXIT_WAIT_SECONDS
        while time.monotonic() < deadline:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return "ended"
            if pid:
                self.exit_description = describe_status(status)
                return self.exit_description
            time.sleep(0.01)
        self.kill()
        self.exit_description = "closed its channel and was killed"
        return self.exit_description

    def kill(self) -> None:
        for pid in [self.pid, *self._other_pids()]:
            _signal(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def close(self) -> None:
        if self.exit_description is None:
            self.kill()
            self.exit_description = "stopped by the judge"
        self.channel.close()
        with contextlib.suppress(BufferError):  # views still alive keep the mapping until they go
            self.arena.close()


def _signal(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, number)


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def _parent(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def _close_fds_except(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
