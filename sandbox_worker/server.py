"""The worker's request loop: hello -> setup -> ready -> build/verify/benchmark/profile -> finished.

Harness and candidate exceptions (even SystemExit) become `failure` events and the loop goes on; the
orchestrator decides what they mean. Anything the harness prints goes to stdout/stderr, which the
orchestrator captures to a bounded worker.log; protocol messages travel only on the socket.

The failure events are built in `failures` and `attempt_monitor`; importing the harness and turning its
return values into protocol values is `harness_contract`.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from sandbox_worker.attempt_monitor import AttemptMonitor, violation_event
from sandbox_worker.channel import Channel, ChannelClosed
from sandbox_worker.failures import clip, failure_event
from sandbox_worker.harness_contract import (
    REQUIRED_FUNCTIONS,
    HarnessContractError,
    import_harness,
    normalize_benchmark,
    normalize_build,
    normalize_verify,
    profile_arity,
)
from sandbox_worker.harness_kit import context
from sandbox_worker.isolation import layers as isolation
from sandbox_worker.judged.judge import CandidateRaised, CheatDetected, Judge, SandboxAttempts
from sandbox_worker.judged.process import CandidateDied

__all__ = [
    "PROTOCOL_VERSION",
    "HarnessContractError",
    "Worker",
    "main",
    "normalize_benchmark",
    "normalize_build",
    "normalize_verify",
]

PROTOCOL_VERSION = 1

# tests/test_protocol.py checks failure events through this name.
_failure = failure_event


def _versions() -> dict[str, str | None]:
    """The interpreter and the packages this worker runs (recorded in run.json as the workers' versions)."""
    versions: dict[str, str | None] = {"python": platform.python_version(), "executable": sys.executable}
    for name in ("torch", "triton"):
        module = sys.modules.get(name)
        versions[name] = getattr(module, "__version__", None) if module else None
    triton = sys.modules.get("triton")
    location = Path(triton.__file__).parent if triton is not None and getattr(triton, "__file__", None) else None
    versions["triton_tlx"] = None if location is None else \
        str((location / "language" / "extra" / "tlx" / "__init__.py").is_file()).lower()
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


class Worker:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.harness: ModuleType | None = None
        self.target: dict[str, Any] = {}
        self.kernel_path = ""
        self.artifact: Any = None
        self.built = False
        self.monitor: AttemptMonitor | None = None
        self.judge: Judge | None = None
        self.autotune: Any = None  # autotune_step.AutotuneSide when the setup carries an autotune setup

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
                if self.judge is not None:
                    self.judge.close()
                finished = self.autotune.finished_fields(getattr(self.judge, "candidate_autotune", None)) \
                    if self.autotune is not None else {}
                finished.update(self._launchers())
                self.channel.send({"kind": "finished", **finished})
                return 0
            handler = getattr(self, f"on_{kind}", None)
            if handler is None:
                return 3
            handler(command)

    def _launchers(self) -> dict[str, Any]:
        """The launchers the judge built, for the `finished` event; none when it has nothing to say or cannot
        say it (a saving for later workers, never a reason for this one to fail)."""
        built = getattr(self.judge, "built_launchers", None)
        try:
            launchers = built() if built is not None else {}
        except Exception:  # noqa: BLE001 - later workers build their own launchers, as before
            return {}
        return {"launchers": launchers} if launchers else {}

    def _setup(self, setup: dict[str, Any]) -> bool:
        started = time.perf_counter()
        try:
            applied = isolation.apply_isolation(setup["isolation"])  # with `processes`, the rest runs in pid 2
            self.target = setup["target"]
            self.kernel_path = setup["kernel_path"]
            context.set_command_context(seed=None, phase="setup")
            if setup.get("autotune"):  # before the harness imports Triton (sandbox_worker/autotune_guard.py)
                from sandbox_worker.autotune_step import AutotuneSide

                self.autotune = AutotuneSide(self.channel, setup["autotune"])
            self.harness = import_harness(setup["harness_path"])
            missing = [name for name in REQUIRED_FUNCTIONS if not callable(getattr(self.harness, name, None))]
            if missing:
                raise HarnessContractError(f"harness does not define {', '.join(missing)}")
            sandboxed = setup["isolation"].get("mode") != "off"
            writable = isolation.writable_dirs(setup["isolation"]) if sandboxed else None
            self.judge = _start_judge(self.harness, self.target, self.kernel_path, writable,
                                      own_pid_namespace=applied.pid_namespace is not None)
            if self.judge is None and writable is not None:
                # after the harness import: from here on, candidate code may run in this process
                self.monitor = AttemptMonitor(writable)
                self.monitor.install()
        except BaseException as exc:  # noqa: BLE001 - everything becomes a reported failure
            if isinstance(exc, KeyboardInterrupt):
                raise
            self.channel.send(failure_event(None, "setup", exc))
            return False
        functions = [n for n in (*REQUIRED_FUNCTIONS, "profile") if callable(getattr(self.harness, n, None))]
        namespace = applied.pid_namespace
        self.channel.send({
            "kind": "ready",
            "isolation": applied.statuses,
            "harness_functions": functions,
            "profile_arity": profile_arity(getattr(self.harness, "profile", None)),
            "versions": _versions(),
            "device": _device_name(),
            "setup_seconds": time.perf_counter() - started,
            "pid_namespace": {"inode": namespace.inode, "init_pid": namespace.init_pid} if namespace else None,
            "verdict_process": "judge" if self.judge is not None else "candidate",
        })
        return True

    def _run(self, command: dict[str, Any], phase: str, call: Any) -> None:
        command_id = command["command_id"]
        context.set_command_context(seed=command.get("seed"), phase=phase, timing_mode=command.get("timing_mode"))
        started = time.perf_counter()
        try:
            value = call()
        except CandidateRaised as exc:  # the candidate process's own failure event, for this command
            value, failure = None, _relayed_failure(command_id, phase, exc.failure)
        except SandboxAttempts as exc:
            value, failure = None, violation_event(command_id, phase, exc.attempts)
        except CheatDetected as exc:
            value, failure = None, {**failure_event(command_id, phase, exc), "category": "cheat", "traceback": ""}
        except CandidateDied as exc:
            value, failure = None, {**failure_event(command_id, phase, exc), "category": "crashed",
                                    "message": f"the candidate process {exc}", "traceback": ""}
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a candidate is a failure, not an exit
            if isinstance(exc, KeyboardInterrupt):
                raise
            value, failure = None, failure_event(command_id, phase, exc)
        else:
            failure = None
        finally:
            context.set_command_context(seed=None, phase=None)
        attempts = self.monitor.new_attempts() if self.monitor is not None else []
        if attempts:  # an attempt to leave the sandbox outranks whatever the call returned or raised
            failure = violation_event(command_id, phase, attempts)
        if failure is not None:
            _log_traceback(phase, failure)
            self.channel.send(failure)
            return
        self.channel.send({"kind": "reply", "command_id": command_id, "value": value,
                           "seconds": time.perf_counter() - started})

    def on_build(self, command: dict[str, Any]) -> None:
        if self.judge is not None:
            self._run(command, "build", self.judge.build)
            return

        def call() -> dict[str, Any]:
            source = Path(self.kernel_path).read_text(encoding="utf-8")
            value, artifact = normalize_build(self.harness.build(source, self.target))  # type: ignore[union-attr]
            self.artifact, self.built = artifact, value["success"]
            return value

        self._run(command, "build", call)

    def on_verify(self, command: dict[str, Any]) -> None:
        if self.judge is not None:
            self._run(command, "verify", lambda: normalize_verify(self.judge.verify(command["case"])))  # type: ignore[union-attr]
            return
        self._run(command, "verify", lambda: normalize_verify(self.harness.verify(self.artifact, command["case"])))  # type: ignore[union-attr]

    def on_benchmark(self, command: dict[str, Any]) -> None:
        repetitions = int(command["repetitions"])
        if self.judge is not None:
            self._run(command, "benchmark", lambda: normalize_benchmark(
                self.judge.benchmark(command["case"], repetitions)))  # type: ignore[union-attr]
            return
        self._run(command, "benchmark", lambda: normalize_benchmark(
            self.harness.benchmark(self.artifact, command["case"], repetitions)))  # type: ignore[union-attr]

    def on_screen(self, command: dict[str, Any]) -> None:
        from sandbox_worker.screening import InProcessSteps, screen_variants

        if self.judge is not None and not self.judge.records_launches:
            judge = self.judge

            def steps_for(kernel_path: str) -> Any:  # a fresh candidate process per variant
                return judge.for_variant(kernel_path)
        else:  # on a GPU screening runs in this worker: it only ranks, the judged gate decides
            def steps_for(kernel_path: str) -> Any:
                return InProcessSteps(self.harness, self.target, kernel_path)

        self._run(command, "screen", lambda: screen_variants(
            steps_for, command["variants"], command["cases"], seconds_per_case=float(command["seconds_per_case"]),
            repetitions=int(command["repetitions"]), seed=int(command["seed"]),
            budget_seconds=float(command.get("budget_seconds", 600.0)),
            observe_locals=bool(command.get("observe_locals", False))))

    def on_autotune(self, command: dict[str, Any]) -> None:
        """The trusted step (a worker of the untouched kernel, no judge): its autotune runs case by case."""
        self._run(command, "autotune", lambda: self._autotune_side().autotune(
            self.harness, self.target, self.kernel_path, command))

    def on_first_call(self, command: dict[str, Any]) -> None:
        self._run(command, "first_call", lambda: self._autotune_side().first_call(
            self.harness, self.target, self.kernel_path, command))

    def _autotune_side(self) -> Any:
        if self.autotune is None or self.autotune.guard.mode != "tune":
            raise HarnessContractError("autotune and first_call need a setup with an autotune setup in tune mode")
        return self.autotune

    def on_profile(self, command: dict[str, Any]) -> None:
        from sandbox_worker.profiling import run_judged_profile, run_profile

        if self.judge is not None and self.judge.records_launches:
            judge, case, request = self.judge, command["case"], command["request"]
            self._run(command, "profile", lambda: run_judged_profile(judge, case, request))
            return
        if self.judge is not None:
            self._run(command, "profile", _judged_profile)
            return
        self._run(command, "profile", lambda: run_profile(self.harness, self.artifact, command["case"], command["request"]))


def _log_traceback(phase: str, failure: dict[str, Any]) -> None:
    """The failure's traceback into the worker log (stderr): the reply carries only the message."""
    text = failure.get("traceback")
    if text:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"tlx-agent worker: {phase} failed ({failure.get('error_type')}):\n{text}\n")
            sys.stderr.flush()


def _judged_profile() -> dict[str, Any]:
    """What a profile request gets in judged mode on a CPU target: there is no GPU launch to profile."""
    from sandbox_worker.harness_kit.device import cuda_unavailable_reason

    reason = cuda_unavailable_reason() or "a CPU target: there is no GPU launch to profile"
    return {"available": False, "diagnostics": [f"{reason} (judged mode: the candidate runs in its own process)"]}


RELAYED_CATEGORIES = ("exception", "resource_limit", "sandbox_violation", "build")


def _start_judge(harness: ModuleType, target: dict[str, Any], kernel_path: str, writable: list[str] | None, *,
                 own_pid_namespace: bool) -> Judge | None:
    """A judge and its forked candidate process when the harness declares `JUDGE` and the target's
    `verdict_process` is not `candidate`: on the CPU (the Triton interpreter) it calls the candidate per sample,
    on a GPU it replays the candidate's recorded launches. None keeps the harness's own verify/benchmark in
    this process (the orchestrator asks for that when the untouched kernel cannot be judged)."""
    from sandbox_worker.harness_kit.entry_point import JudgedEntry, device_for
    from sandbox_worker.judged.gpu_judge import GpuJudge

    spec = getattr(harness, "JUDGE", None)
    choice = target.get("verdict_process") or "auto"
    if not isinstance(spec, JudgedEntry) or choice == "candidate":
        return None
    if device_for(target) == "cpu":
        return Judge.start(spec, target, kernel_path, writable_dirs=writable, own_pid_namespace=own_pid_namespace)
    return GpuJudge.start(spec, target, kernel_path, writable_dirs=writable, own_pid_namespace=own_pid_namespace,
                          harness_path=getattr(harness, "__file__", None))


def _relayed_failure(command_id: int, phase: str, failure: dict[str, Any]) -> dict[str, Any]:
    """The candidate process's failure event, re-addressed to this command; its text is its own."""
    category = failure.get("category")
    return {"kind": "failure", "command_id": command_id, "phase": phase,
            "error_type": str(failure.get("error_type", "Exception"))[:200],
            "message": clip(str(failure.get("message", ""))), "traceback": clip(str(failure.get("traceback", ""))),
            "category": category if category in RELAYED_CATEGORIES else "exception"}


def main() -> int:
    try:
        channel = Channel.from_environment()
    except (KeyError, ValueError, OSError):
        sys.stderr.write("sandbox_worker: TLX_PROTOCOL_FD is not set; this module is started by tlx-agent\n")
        return 2
    os.environ.pop("TLX_WORKER_TOKEN_HINT", None)
    return Worker(channel).serve()
