"""A scripted worker that speaks the protocol by hand and misbehaves as `argv[1]` says (stdlib only).

It stands in for `python -m sandbox_worker` (through a test spawner), so the orchestrator's handling of
hostile protocol traffic can be tested without a harness, torch or a candidate.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from sandbox_worker.server import PROTOCOL_VERSION

SCENARIO = sys.argv[1]
SOCK = socket.socket(fileno=int(os.environ["TLX_PROTOCOL_FD"]))
READER = SOCK.makefile("rb")


def send_raw(data: bytes) -> None:
    SOCK.sendall(data)


def send(event: dict) -> None:
    send_raw(json.dumps(event).encode() + b"\n")


def receive() -> dict | None:
    line = READER.readline()
    return json.loads(line) if line else None


def reply(command: dict, value: dict) -> None:
    send({"kind": "reply", "command_id": command["command_id"], "value": value, "seconds": 0.001})


def main() -> int:
    hello = json.dumps({"kind": "hello", "protocol_version": PROTOCOL_VERSION, "pid": os.getpid(),
                        "python": "3"}).encode() + b"\n"
    if SCENARIO == "event_flood":  # in the same write as hello: the orchestrator reads both in one chunk
        hello += b"".join(json.dumps({"kind": "finished"}).encode() + b"\n" for _ in range(100_000))
    send_raw(hello)
    receive()  # setup
    send({"kind": "ready", "isolation": {}, "harness_functions": ["build", "verify", "benchmark"],
          "profile_arity": None, "versions": {}, "device": "cpu", "setup_seconds": 0.0})
    while (command := receive()) is not None:
        kind = command["kind"]
        if kind == "build":
            if SCENARIO == "wrong_command_id":
                command = {**command, "command_id": 99}
            reply(command, {"success": True, "diagnostics": ""})
        elif kind == "verify":
            reply(command, {"passed": True, "diagnostics": "", "metrics": {}})
            if SCENARIO == "double_reply":
                reply(command, {"passed": True, "diagnostics": "", "metrics": {}})
        elif kind == "benchmark":
            if SCENARIO == "huge_samples":
                reply(command, {"samples_us": [1e308] * 40})
            elif SCENARIO == "non_finite":
                send_raw(b'{"kind": "reply", "command_id": %d, "value": {"samples_us": [NaN, 1.0]}, "seconds": 0.1}\n'
                         % command["command_id"])
            else:
                reply(command, {"samples_us": [10.0 + 0.01 * i for i in range(40)]})
        elif kind == "shutdown":
            if SCENARIO == "silent_shutdown":
                time.sleep(3600)
            send({"kind": "finished"})
            if SCENARIO == "after_finished":
                reply({"command_id": 1}, {"success": True, "diagnostics": ""})
            return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
