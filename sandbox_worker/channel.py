"""JSON lines over the dedicated protocol socket (never stdout)."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

MAX_LINE_BYTES = 4 * 1024 * 1024


class ChannelClosed(Exception):
    """The orchestrator closed its end; the worker should exit."""


class LineTooLong(ChannelClosed, ValueError):
    """The peer sent more than MAX_LINE_BYTES without a newline (to the judge: the candidate broke protocol)."""


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()

    @classmethod
    def from_environment(cls, variable: str = "TLX_PROTOCOL_FD") -> Channel:
        fd = int(os.environ.pop(variable))
        os.set_inheritable(fd, False)  # children (ncu, compilers) must not inherit the protocol
        return cls(socket.socket(fileno=fd))

    def close(self) -> None:
        self._sock.close()

    @property
    def fileno(self) -> int:
        return self._sock.fileno()

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":"), allow_nan=False, default=str).encode() + b"\n"
        self._sock.sendall(data)

    def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ChannelClosed()
            self._buffer.extend(chunk)
            if len(self._buffer) > MAX_LINE_BYTES:
                raise LineTooLong(f"over {MAX_LINE_BYTES} bytes without a newline")
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError("protocol message is not an object")
        return message
