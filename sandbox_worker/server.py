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
import resource
import socket
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from sandbox_worker.channel import Channel, ChannelClosed
from sandbox_worker.harness_kit import context
from sandbox_worker.isolation import layers as isolation

PROTOCOL_VERSION = 1
MAX_TEXT = 20_000
REQUIRED_FUNCTIONS = ("build", "verify", "benchmark")


class HarnessContractError(Exception):
    """The harness returned something outside the bundle contract."""


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 40] + f"... [{len(text) - limit + 40} chars cut]"


def _is_allocation_failure(exc: BaseException) -> bool:
    """MemoryError, ENOMEM, or torch's allocator failing (a RuntimeError / OutOfMemoryError)."""
    if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
        return True
    text = str(exc).lower()
    return type(exc).__name__ == "OutOfMemoryError" or (
        isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text))


def _classify(exc: BaseException) -> str:
    if _is_allocation_failure(exc):
        return "resource_limit"
    if isinstance(exc, OSError) and exc.errno in (errno.EFBIG, errno.EMFILE, errno.ENFILE, errno.EAGAIN):
        return "resource_limit"
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.ENETUNREACH, errno.EROFS):
        return "sandbox_violation"
    return "exception"


def _soft_limit(kind: int) -> str:
    soft, _hard = resource.getrlimit(kind)
    if soft == resource.RLIM_INFINITY:
        return "unlimited"
    if kind == resource.RLIMIT_NOFILE:
        return str(soft)
    if soft >= 1 << 30:
        return f"{soft / (1 << 30):.2f} GiB"
    return f"{soft / (1 << 20):.2f} MiB" if soft >= 1 << 20 else f"{soft} bytes"


def _limit_hit(exc: BaseException) -> str:
    """Which limit a resource_limit failure ran into, for the one-line reason."""
    if _is_allocation_failure(exc):
        if "cuda" in str(exc).lower():
            return "GPU memory"
        return f"memory (RLIMIT_DATA {_soft_limit(resource.RLIMIT_DATA)})"
    number = getattr(exc, "errno", None)
    if number == errno.EFBIG:
        return f"file size (RLIMIT_FSIZE {_soft_limit(resource.RLIMIT_FSIZE)})"
    if number == errno.EMFILE:
        return f"open files (RLIMIT_NOFILE {_soft_limit(resource.RLIMIT_NOFILE)})"
    if number == errno.ENFILE:
        return "the system-wide open file table"
    return "processes or threads (EAGAIN)"


def _failure(command_id: int | None, phase: str, exc: BaseException) -> dict[str, Any]:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, SystemExit):
        message = f"SystemExit({exc.code!r}) raised during {phase}"
    category = _classify(exc)
    if category == "resource_limit":
        detail = "" if message == type(exc).__name__ else f": {_clip(message, 1000)}"
        message = f"{_limit_hit(exc)} exhausted: {type(exc).__name__}{detail}"
    return {
        "kind": "failure",
        "command_id": command_id,
        "phase": phase,
        "error_type": type(exc).__name__[:200],
        "message": _clip(message),
        "traceback": _clip("".join(traceback.format_exception(type(exc), exc, exc.__traceback__))),
        "category": category,
    }


# ---- what the candidate attempted: writes outside the sandbox, network connections ----------------

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


def _violation(command_id: int, phase: str, attempts: list[str]) -> dict[str, Any]:
    more = f" (+{len(attempts) - 3} more)" if len(attempts) > 3 else ""
    return {
        "kind": "failure",
        "command_id": command_id,
        "phase": phase,
        "error_type": "SandboxViolation",
        "message": _clip("attempted " + "; ".join(attempts[:3]) + more),
        "traceback": "",
        "category": "sandbox_violation",
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
        self.monitor: AttemptMonitor | None = None

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
            if setup["isolation"].get("mode") != "off":
                # after the harness import: from here on, candidate code may run
                self.monitor = AttemptMonitor(isolation.writable_dirs(setup["isolation"]))
                self.monitor.install()
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
            value, failure = None, _failure(command_id, phase, exc)
        else:
            failure = None
        finally:
            context.set_command_context(seed=None, phase=None)
        attempts = self.monitor.new_attempts() if self.monitor is not None else []
        if attempts:  # an attempt to leave the sandbox outranks whatever the call returned or raised
            failure = _violation(command_id, phase, attempts)
        if failure is not None:
            self.channel.send(failure)
            return
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
