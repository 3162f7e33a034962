"""A scripted JSON HTTP server on 127.0.0.1 that real SDK clients talk to (OpenAI and Anthropic tests).

Each POST pops one step of the script (the last step repeats): `("ok", text)` answers 200 with the body
the subclass builds for `text`, `("status", code)` or `("status", (code, headers))` answers that error,
`("sleep", seconds)` holds the request until released or `seconds` pass, then answers "ok" with
`slow_reply`. Requests and their headers are recorded for assertions.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedServer:
    route = "/"
    url_suffix = ""

    def __init__(self, steps: list[tuple[str, Any]], slow_reply: str = "") -> None:
        self.steps = list(steps)
        self.slow_reply = slow_reply
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                kind, value = fake.steps.pop(0) if len(fake.steps) > 1 else fake.steps[0]
                if self.path != fake.route:
                    return self.reply(404, fake.error_body(404, f"no route {self.path}"), {})
                if kind == "status":
                    code, headers = value if isinstance(value, tuple) else (value, {})
                    return self.reply(code, fake.error_body(code, "server exploded"), {**fake.error_headers(code), **headers})
                if kind == "sleep":
                    fake.release.wait(value)
                    kind, value = "ok", fake.slow_reply
                self.reply(200, fake.ok_body(body, kind, value), {})

            def reply(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, header in headers.items():
                        self.send_header(name, header)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{self.url_suffix}"

    def ok_body(self, request: dict[str, Any], kind: str, value: Any) -> dict[str, Any]:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def error_headers(self, status: int) -> dict[str, str]:
        return {}

    def __enter__(self) -> ScriptedServer:
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
