"""The worker's side of kernels that autotune themselves: the guard's setup, the trusted step's commands
(`autotune`, `first_call`) and what the worker reports of its autotuners when it finishes.

`autotune` calls the kernel through the harness's own `build` and `verify`, case by case, so the kernel's
autotune runs on the calls a run makes, in this process (the orchestrator starts this worker with the
untouched kernel and without a judge: it runs no candidate code). `first_call` loads the kernel and calls it
once, in a worker that has done nothing before: the import, compile (or cache) and autotune a user's process
pays. Only the standard library is imported at module level.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType
from typing import Any

from sandbox_worker import autotune_guard
from sandbox_worker.channel import Channel
from sandbox_worker.harness_contract import normalize_build, normalize_verify
from sandbox_worker.harness_kit import context

FIRST_CALL_SALT = 303


class AutotuneStepFailed(RuntimeError):
    """The trusted step could not call the kernel on a case; the message names the case."""


class AutotuneSide:
    """One worker's autotune guard and the commands that let its autotune run."""

    def __init__(self, channel: Channel, setup: dict[str, Any]) -> None:
        from sandbox_worker.harness_kit.timing import triton_interpreter_active

        self.channel = channel
        self.command_id: int | None = None  # progress goes out only while `autotune` or `first_call` runs
        self.guard = autotune_guard.install(setup, interpreter=triton_interpreter_active(),
                                            on_progress=self._progress, phase=context.current_phase)

    def _progress(self, event: dict[str, Any]) -> None:
        if self.command_id is not None:
            self.channel.send({"kind": "autotune_progress", "command_id": self.command_id, **event})

    def finished_fields(self, candidate_process: dict[str, Any] | None) -> dict[str, Any]:
        """The `autotune` field of the `finished` event: this process's autotuners, and the judge's candidate
        process's as it reported them (its own word about itself, recorded as such)."""
        activity: dict[str, Any] = {"worker": self.guard.activity()}
        if isinstance(candidate_process, dict):
            activity["candidate_process"] = candidate_process
        return {"autotune": activity}

    def autotune(self, harness: ModuleType, target: dict[str, Any], kernel_path: str,
                 command: dict[str, Any]) -> dict[str, Any]:
        self.command_id = int(command["command_id"])
        try:
            source = Path(kernel_path).read_text(encoding="utf-8")
            built, artifact = normalize_build(harness.build(source, target))
            if not built["success"]:
                raise AutotuneStepFailed(f"the kernel does not build: {built['diagnostics'][:500]}")
            outcomes = []
            for case in command["cases"]:
                self.guard.case_id = str(case.get("case_id"))
                started = time.perf_counter()
                try:
                    verdict = normalize_verify(harness.verify(artifact, case))
                except Exception as exc:
                    raise AutotuneStepFailed(f"case {self.guard.case_id}: {type(exc).__name__}: {exc}") from exc
                outcomes.append({"case_id": self.guard.case_id, "passed": verdict["passed"],
                                 "diagnostics": verdict["diagnostics"][:2000],
                                 "seconds": time.perf_counter() - started})
            return {"cases": outcomes, "choices": self.guard.take_choices()}
        finally:
            self.command_id, self.guard.case_id = None, None

    def first_call(self, harness: ModuleType, target: dict[str, Any], kernel_path: str,
                   command: dict[str, Any]) -> dict[str, Any]:
        """Load the kernel and call it once: the harness's JUDGE entry on drawn inputs (drawn before the clock
        starts), else the harness's build and verify."""
        from sandbox_worker.harness_kit.entry_point import JudgedEntry, device_for

        self.command_id = int(command["command_id"])
        case = command["case"]
        self.guard.case_id = str(case.get("case_id"))
        self.guard.compile_ahead = False  # the latency a user's process pays: Triton compiles one at a time
        tuned_before = self.guard.counts["tuned"]
        try:
            source = Path(kernel_path).read_text(encoding="utf-8")
            spec = getattr(harness, "JUDGE", None)
            passed = None
            if isinstance(spec, JudgedEntry):
                from sandbox_worker.harness_kit.loader import load_kernel_module

                device = device_for(target)
                inputs = spec.make_inputs(case, device, FIRST_CALL_SALT)
                _synchronize(device)
                started = time.perf_counter()
                entry = getattr(load_kernel_module(source), spec.entry)
                loaded = time.perf_counter()
                entry(*inputs)
                _synchronize(device)
                what = "entry"
            else:
                started = time.perf_counter()
                built, artifact = normalize_build(harness.build(source, target))
                loaded = time.perf_counter()
                if not built["success"]:
                    raise AutotuneStepFailed(f"the kernel does not build: {built['diagnostics'][:500]}")
                passed = normalize_verify(harness.verify(artifact, case))["passed"]
                what = "verify"
            ended = time.perf_counter()
            return {"case_id": self.guard.case_id, "import_seconds": loaded - started, "call_seconds": ended - loaded,
                    "what": what, "passed": passed, "autotuned": self.guard.counts["tuned"] - tuned_before,
                    "choices": self.guard.take_choices()}
        finally:
            self.command_id, self.guard.case_id, self.guard.compile_ahead = None, None, True


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
