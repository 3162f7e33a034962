"""Spawning one worker and talking to it: the spawner seam and the controller-side proxy.

The spawner hides how a process is made (plain spawn today, a fork-server later); all the worker
needs is a connected socket fd number in TLX_PROTOCOL_FD. `WorkerConnection` reads bounded JSON
lines from that socket, validates each against `protocol.worker.WorkerEvent`, and drains the
worker's stdout/stderr into a bounded log file.
"""

from __future__ import annotations

import json
import math
import select
import socket
import subprocess
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import trio
from pydantic import BaseModel, ValidationError

from orchestrator.text import one_line
from protocol.worker import MAX_LINE_BYTES, WORKER_EVENT_ADAPTER


class ProtocolViolation(Exception):
    """The worker sent something outside the protocol; the evaluation ends as protocol_violation."""


class WorkerGone(Exception):
    """The protocol socket closed: the worker exited or died."""


@dataclass
class WorkerLaunch:
    argv: Sequence[str]
    env: dict[str, str]
    cwd: Path
    log_path: Path
    token: str
    log_limit_bytes: int = 1 << 20


@dataclass
class SpawnedWorker:
    process: trio.Process
    protocol: trio.SocketStream
    output: trio.abc.ReceiveStream
    launch: WorkerLaunch


class Spawner(Protocol):
    async def spawn(self, launch: WorkerLaunch) -> SpawnedWorker: ...


class SubprocessSpawner:
    """A fresh interpreter per worker, in a new session, stdin /dev/null, one socketpair for the protocol."""

    async def spawn(self, launch: WorkerLaunch) -> SpawnedWorker:
        parent_end, child_end = socket.socketpair()
        try:
            env = dict(launch.env, TLX_PROTOCOL_FD=str(child_end.fileno()))
            process = await trio.lowlevel.open_process(
                list(launch.argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(launch.cwd),
                pass_fds=(child_end.fileno(),),
                start_new_session=True,
            )
        except BaseException:
            parent_end.close()
            raise
        finally:
            child_end.close()  # otherwise we never see EOF when the worker dies
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(parent_end))
        assert process.stdout is not None
        return SpawnedWorker(process=process, protocol=stream, output=process.stdout, launch=launch)


@dataclass
class OutputCapture:
    """Bounded copy of the worker's stdout/stderr: the head goes to the log, the rest is counted."""

    path: Path
    limit_bytes: int
    written: int = 0
    dropped: int = 0

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        """Read until EOF (the caller cancels it when a grandchild keeps the pipe open); a log file that
        cannot be opened or written (full disk) loses the log, never the run."""
        try:
            log = self.path.open("ab")
        except OSError:
            log = None
        try:
            while True:
                try:
                    chunk = await stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not chunk:
                    return
                kept = self._keep(log, chunk[: max(0, self.limit_bytes - self.written)])
                self.written += kept
                self.dropped += len(chunk) - kept
        finally:
            if log is not None:
                with suppress(OSError):
                    log.close()

    def _keep(self, log: Any, head: bytes) -> int:
        if not head or log is None:
            return 0
        try:
            log.write(head)
            log.flush()
        except OSError:
            self.limit_bytes = self.written  # stop trying; everything from here on is only counted
            return 0
        return len(head)

    def finish(self) -> None:
        if self.dropped:
            with suppress(OSError), self.path.open("ab") as log:
                log.write(f"\n[tlx-agent] worker output truncated: {self.dropped} more bytes dropped\n".encode())


class WorkerConnection:
    """Controller-side proxy for one worker: send commands, wait for validated events."""

    def __init__(self, spawned: SpawnedWorker) -> None:
        self.spawned = spawned
        self._buffer = bytearray()

    async def send(self, command: BaseModel) -> None:
        data = command.model_dump_json().encode() + b"\n"
        try:
            await self.spawned.protocol.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise WorkerGone(f"cannot send {getattr(command, 'kind', 'command')}: {exc}") from None

    async def receive_event(self) -> Any:
        """The next event, validated; ProtocolViolation for anything malformed, WorkerGone on EOF."""
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                if len(line) > MAX_LINE_BYTES:
                    raise ProtocolViolation(f"line of {len(line)} bytes exceeds the {MAX_LINE_BYTES}-byte limit")
                return parse_event(line)
            if len(self._buffer) > MAX_LINE_BYTES:
                raise ProtocolViolation(f"line longer than {MAX_LINE_BYTES} bytes without a newline")
            chunk = await self._receive_chunk()
            if not chunk:
                if self._buffer:
                    raise ProtocolViolation("connection closed in the middle of a line")
                raise WorkerGone("protocol socket closed")
            self._buffer.extend(chunk)

    async def _receive_chunk(self) -> bytes:
        try:
            return await self.spawned.protocol.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise WorkerGone(str(exc)) from None

    def _socket_readable(self) -> bool:
        """Data or EOF is waiting on the protocol socket right now (a zero-timeout poll, no read)."""
        try:
            readable, _, _ = select.select([self.spawned.protocol.socket.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return bool(readable)

    async def ensure_quiet(self, before: str) -> None:
        """The worker speaks only when spoken to: bytes waiting before a command is sent were never asked for.

        This is how a forged event written to the protocol fd by code inside the worker shows up: the
        worker's own reply then arrives as an extra event. Raises ProtocolViolation naming what arrived,
        WorkerGone when the socket is at EOF (the worker died; the exit status tells how).
        """
        if not self._buffer:
            if not self._socket_readable():
                return
            chunk = await self._receive_chunk()  # returns at once: the socket is readable
            if not chunk:
                raise WorkerGone("protocol socket closed")
            self._buffer.extend(chunk)
        raise ProtocolViolation(f"unsolicited data before {before}: {describe_unsolicited(bytes(self._buffer))}")

    async def ensure_closed(self, before: float) -> None:
        """After `finished` the worker exits: only EOF may follow. Waits until trio time `before` at most
        (a child the candidate forked may hold the socket open; the kill that follows ends it)."""
        with trio.move_on_at(before):
            while not self._buffer:
                try:
                    chunk = await self._receive_chunk()
                except WorkerGone:  # a reset instead of a clean EOF: still nothing after `finished`
                    return
                if not chunk:
                    return
                self._buffer.extend(chunk)
            raise ProtocolViolation(f"data after the finished event: {describe_unsolicited(bytes(self._buffer))}")


def describe_unsolicited(data: bytes) -> str:
    """One line about bytes nobody asked for: the event they parse to, or their size."""
    line, newline, _rest = data.partition(b"\n")
    if newline and len(line) <= MAX_LINE_BYTES:
        try:
            event = parse_event(line)
        except ProtocolViolation as exc:
            return f"{len(data)} bytes ({exc})"
        command = getattr(event, "command_id", None)
        return f"a {event.kind} event" + (f" for command {command}" if command is not None else "") + \
            " (forged, or a duplicate of a real one)"
    return f"{len(data)} bytes without a complete line"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} overflows a float")
    return value


def parse_event(line: bytes) -> Any:
    """One protocol line -> a validated event. Anything else, however hostile (NaN or 1e999 that would
    break the JSON artifacts later, 5000-digit integers, nesting deep enough to overflow the parser's
    stack), is a ProtocolViolation and never an exception that could take the orchestrator down."""
    try:
        payload = json.loads(line, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ProtocolViolation(f"invalid JSON on the protocol channel: {one_line(exc, 200) or type(exc).__name__}") from None
    try:
        return WORKER_EVENT_ADAPTER.validate_python(payload)
    except RecursionError:
        raise ProtocolViolation("event nested too deeply") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ProtocolViolation(f"invalid {payload.get('kind', '?') if isinstance(payload, dict) else 'message'} "
                                f"event: {where}: {first['msg']}") from None
