"""The worker's request loop: hello -> setup -> ready -> build/verify/benchmark/profile -> finished.

Harness and candidate exceptions (even SystemExit) become `failure` events and the loop goes on; the
orchestrator decides what they mean. Anything the harness prints goes to stdout/stderr, which the
orchestrator captures to a bounded worker.log; protocol messages travel only on the socket.
"""

from __future__ import annotations

import errno
import importlib.util
import inspect
import math
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from sandbox_worker import isolation
from sandbox_worker.channel import Channel, ChannelClosed
from sandbox_worker.harness_kit import context

PROTOCOL_VERSION = 1
MAX_TEXT = 20_000
REQUIRED_FUNCTIONS = ("build", "verify", "benchmark")


class HarnessContractError(Exception):
    """The harness returned something outside the bundle contract."""


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 40] + f"... [{len(text) - limit + 40} chars cut]"


def _classify(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "resource_limit"
    if isinstance(exc, OSError) and exc.errno in (errno.EFBIG, errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN):
        return "resource_limit"
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.ENETUNREACH, errno.EROFS):
        return "sandbox_violation"
    return "exception"


def _failure(command_id: int | None, phase: str, exc: BaseException) -> dict[str, Any]:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, SystemExit):
        message = f"SystemExit({exc.code!r}) raised during {phase}"
    return {
        "kind": "failure",
        "command_id": command_id,
        "phase": phase,
        "error_type": type(exc).__name__[:200],
        "message": _clip(message),
        "traceback": _clip("".join(traceback.format_exception(type(exc), exc, exc.__traceback__))),
        "category": _classify(exc),
    }


def _import_harness(path: str) -> ModuleType:
    harness_path = Path(path)
    sys.path.insert(0, str(harness_path.parent))
    spec = importlib.util.spec_from_file_location("tlx_agent_harness", harness_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import harness {harness_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["tlx_agent_harness"] = module
    spec.loader.exec_module(module)
    return module


def _profile_arity(function: Any) -> int | None:
    if function is None:
        return None
    try:
        inspect.signature(function).bind(object(), {}, {})
        return 3
    except TypeError:
        return 2


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("torch", "triton"):
        module = sys.modules.get(name)
        versions[name] = getattr(module, "__version__", None) if module else None
    return versions


def _device_name() -> str | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if torch.cuda.is_available():
            return str(torch.cuda.get_device_name(0))
    except Exception:  # noqa: BLE001 - a broken CUDA init still lets CPU harnesses run
        return None
    return "cpu"


# ---- normalizers: harness return values -> protocol values -------------------------------------


def normalize_build(value: Any) -> tuple[dict[str, Any], Any]:
    if isinstance(value, dict) and "success" in value:
        success = bool(value["success"])
        return {"success": success, "diagnostics": _clip(str(value.get("diagnostics", "")))}, value.get("artifact")
    return {"success": True, "diagnostics": ""}, value


def normalize_verify(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"passed": value, "diagnostics": "", "metrics": {}}
    if isinstance(value, dict) and "passed" in value:
        metrics = value.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise HarnessContractError("verify() metrics must be a dict")
        return {
            "passed": value["passed"] is True,
            "diagnostics": _clip(str(value.get("diagnostics", ""))),
            "metrics": _json_safe(metrics),
        }
    raise HarnessContractError(f"verify() must return bool or {{'passed': ...}}, got {type(value).__name__}")


def normalize_benchmark(value: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if isinstance(value, dict):
        samples = value.get("samples_us")
        extra = {
            "warmup_count": value.get("warmup_count"),
            "cache_policy": None if value.get("cache_policy") is None else str(value["cache_policy"])[:200],
            "metrics": _json_safe(value.get("metrics") or {}),
        }
    else:
        samples = value
    try:
        samples = [float(s) for s in samples]
    except (TypeError, ValueError) as exc:
        raise HarnessContractError(f"benchmark() samples must be numbers in microseconds: {exc}") from None
    if not samples:
        raise HarnessContractError("benchmark() returned no samples")
    if not all(math.isfinite(s) and s > 0 for s in samples):
        raise HarnessContractError("benchmark() samples must be finite and > 0 microseconds")
    return {"samples_us": samples, **extra}


def _json_safe(value: Any, depth: int = 0) -> Any:
    """Turn harness output into plain JSON; non-finite floats become None (null, never a fake number)."""
    if depth > 12:
        return str(value)[:200]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v, depth + 1) for v in value]
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return _json_safe(item(), depth + 1)
        except Exception:  # noqa: BLE001 - fall back to text
            pass
    return str(value)[:1000]


class Worker:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.harness: ModuleType | None = None
        self.target: dict[str, Any] = {}
        self.kernel_path = ""
        self.artifact: Any = None
        self.built = False

    def serve(self) -> int:
        self.channel.send({"kind": "hello", "protocol_version": PROTOCOL_VERSION, "pid": os.getpid(),
                           "python": platform.python_version()})
        setup = self.channel.receive()
        if setup.get("kind") != "setup":
            return 3
        if not self._setup(setup):
            return 0
        while True:
            try:
                command = self.channel.receive()
            except ChannelClosed:
                return 0
            kind = command.get("kind")
            if kind == "shutdown":
                self.channel.send({"kind": "finished"})
                return 0
            handler = getattr(self, f"on_{kind}", None)
            if handler is None:
                return 3
            handler(command)

    def _setup(self, setup: dict[str, Any]) -> bool:
        started = time.perf_counter()
        try:
            statuses = isolation.apply_layers(setup["isolation"])
            self.target = setup["target"]
            self.kernel_path = setup["kernel_path"]
            context.set_command_context(seed=None, phase="setup")
            self.harness = _import_harness(setup["harness_path"])
            missing = [name for name in REQUIRED_FUNCTIONS if not callable(getattr(self.harness, name, None))]
            if missing:
                raise HarnessContractError(f"harness does not define {', '.join(missing)}")
        except BaseException as exc:  # noqa: BLE001 - everything becomes a reported failure
            if isinstance(exc, KeyboardInterrupt):
                raise
            self.channel.send(_failure(None, "setup", exc))
            return False
        functions = [n for n in (*REQUIRED_FUNCTIONS, "profile") if callable(getattr(self.harness, n, None))]
        self.channel.send({
            "kind": "ready",
            "isolation": statuses,
            "harness_functions": functions,
            "profile_arity": _profile_arity(getattr(self.harness, "profile", None)),
            "versions": _versions(),
            "device": _device_name(),
            "setup_seconds": time.perf_counter() - started,
        })
        return True

    def _run(self, command: dict[str, Any], phase: str, call: Any) -> None:
        command_id = command["command_id"]
        context.set_command_context(seed=command.get("seed"), phase=phase)
        started = time.perf_counter()
        try:
            value = call()
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a candidate is a failure, not an exit
            if isinstance(exc, KeyboardInterrupt):
                raise
            self.channel.send(_failure(command_id, phase, exc))
            return
        finally:
            context.set_command_context(seed=None, phase=None)
        self.channel.send({"kind": "reply", "command_id": command_id, "value": value,
                           "seconds": time.perf_counter() - started})

    def on_build(self, command: dict[str, Any]) -> None:
        def call() -> dict[str, Any]:
            source = Path(self.kernel_path).read_text(encoding="utf-8")
            value, artifact = normalize_build(self.harness.build(source, self.target))  # type: ignore[union-attr]
            self.artifact, self.built = artifact, value["success"]
            return value

        self._run(command, "build", call)

    def on_verify(self, command: dict[str, Any]) -> None:
        self._run(command, "verify", lambda: normalize_verify(self.harness.verify(self.artifact, command["case"])))  # type: ignore[union-attr]

    def on_benchmark(self, command: dict[str, Any]) -> None:
        repetitions = int(command["repetitions"])
        self._run(command, "benchmark", lambda: normalize_benchmark(
            self.harness.benchmark(self.artifact, command["case"], repetitions)))  # type: ignore[union-attr]

    def on_profile(self, command: dict[str, Any]) -> None:
        from sandbox_worker.profiling import run_profile

        self._run(command, "profile", lambda: run_profile(self.harness, self.artifact, command["case"], command["request"]))


def main() -> int:
    try:
        channel = Channel.from_environment()
    except (KeyError, ValueError, OSError):
        sys.stderr.write("sandbox_worker: TLX_PROTOCOL_FD is not set; this module is started by tlx-agent\n")
        return 2
    os.environ.pop("TLX_WORKER_TOKEN_HINT", None)
    return Worker(channel).serve()
