"""optimize's side of the preflight: before the output dir exists, `--arch`, the target against the device the
harness sees and `--bundle-lock` (`optimize_preflight`); then either no preflight (`--skip-validation`, a matching
lock: `validated_without_preflight`) or the built-in one in the run's own workers (`optimize_builtin`, which
`OptimizationRun` awaits with its spawner before the baseline)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from orchestrator.bundle import arch as arch_mod
from orchestrator.bundle.inputs import Inputs, sha256_file
from orchestrator.bundle.interpreter import triton_facts, triton_mismatch
from orchestrator.bundle.lock import load_lock, lock_summary, match_lock
from orchestrator.ledger.config import RunConfig
from orchestrator.ledger.live_log import LiveLog, quote
from orchestrator.preflight.runner import Settings, builtin_validation
from orchestrator.worker.process import Spawner
from protocol.bundle import BundleError


def _device_identity(device: dict[str, Any]) -> tuple[Any, ...]:
    capability = device.get("capability")
    return (device.get("kind"), device.get("name") if device.get("kind") == arch_mod.CUDA else None,
            tuple(capability) if capability else None)


def optimize_preflight(config: RunConfig, inputs: Inputs) -> tuple[arch_mod.DeviceView | None,
                                                                   arch_mod.ArchSpec | None, dict[str, Any] | None]:
    """Before optimize creates its output dir: `--arch`, the target against the device, `--bundle-lock`.

    Raises `BundleError` with one line naming what does not match. Returns the device the harness sees
    (None when nothing needed a probe), the `--arch` spec, and with `--bundle-lock` the lock's summary
    for run.json (else None).
    """
    arch = arch_mod.resolve_arch_flag(config.arch)
    if config.bundle_lock is not None and config.skip_validation:
        raise BundleError("--bundle-lock and --skip-validation exclude each other; pass one of them")
    view = None
    if arch is not None or not config.skip_validation:
        view = arch_mod.observe_device(inputs.target, arch, config.worker_python)
        problem = arch_mod.arch_mismatch(arch, view) if arch is not None else None
        if problem is None and view.probe is not None:
            worker_triton = view.probe.get("triton")
            problem = triton_mismatch(triton_facts(), worker_triton if isinstance(worker_triton, dict) else None,
                                      config.worker_python)
        if problem is None and not config.skip_validation:
            problem = arch_mod.target_mismatch(inputs.target, view)
        if problem is not None:
            raise BundleError(problem)
    if config.bundle_lock is None:
        return view, arch, None
    lock_path = config.bundle_lock
    lock = load_lock(lock_path)
    if lock.mode != "validate":
        raise BundleError(f"{lock_path} was written by optimize's built-in preflight, which measures no stability; "
                          "run tlx-agent validate and pass its bundle.lock.json")
    match_lock(lock, lock_path, inputs)
    assert view is not None
    if _device_identity(lock.device) != _device_identity(view.to_json()):
        locked = arch_mod.DeviceView(kind=str(lock.device.get("kind")), device=str(lock.device.get("device")),
                                     name=lock.device.get("name"),  # type: ignore[arg-type]
                                     capability=tuple(lock.device["capability"]) if lock.device.get("capability")
                                     else None, interpreter=bool(lock.device.get("interpreter")))
        raise BundleError(f"{lock_path} was validated where {locked.describe()}, but now {view.describe()}; "
                          "validate the bundle on this device")
    locked_arch = arch_mod.lookup(str(lock.settings.get("arch") or ""))
    if arch is not None and locked_arch is not None and \
            (locked_arch.kind, locked_arch.cuda_major) != (arch.kind, arch.cuda_major):
        raise BundleError(f"{lock_path} was validated with --arch {locked_arch.name}, this run has --arch {arch.name}")
    summary = lock_summary(lock, lock_path, sha256_file(lock_path))
    warnings = []
    if config.budget.max_cv < float(lock.settings.get("max_cv", 0.0)):
        warnings.append(f"this run's --max-cv {config.budget.max_cv} is stricter than the {lock.settings['max_cv']} "
                        "the lock's stability check used")
    summary["warnings"] = warnings
    return view, arch, summary


def validated_without_preflight(config: RunConfig, log: LiveLog,
                                locked: dict[str, Any] | None) -> tuple[bool, dict[str, Any] | None]:
    """Whether optimize needs no built-in preflight (`--skip-validation`, or a matching `--bundle-lock`, which
    `optimize_preflight` checked and summarised as `locked`), with the validation summary for run.json: `locked`
    with the lock, None when skipped or when the preflight still has to run."""
    if config.skip_validation:
        log.event("validate status=skipped (--skip-validation): the bundle's ability to reject bad candidates "
                  "is unproven for this run")
        return True, None
    if config.bundle_lock is not None:
        summary = locked or {}
        log.event(f"validate status=locked lock={str(config.bundle_lock)!r} created_at={summary.get('created_at')} "
                  "files=unchanged")
        for warning in summary.get("warnings", []):
            log.event(f"validate warning={quote(warning)}")
        return True, locked
    return False, None


async def optimize_builtin(config: RunConfig, inputs: Inputs, log: LiveLog, output_dir: Path,
                           view: arch_mod.DeviceView | None, arch: arch_mod.ArchSpec | None,
                           spawner: Spawner) -> tuple[str | None, dict[str, Any]]:
    """optimize's built-in preflight, in the run's workers once its output dir exists; `view` and `arch` are
    what `optimize_preflight` returned.

    Returns (the line that stops the run, or None; this preflight's lock summary for run.json).
    """
    assert view is not None
    settings = Settings(max_cv=config.budget.max_cv, repetitions=config.budget.benchmark_repetitions,
                        phase_seconds=config.budget.max_candidate_seconds, benchmark_workers=0,
                        isolation=config.isolation,
                        worker_python=config.worker_python, data_limit_bytes=config.data_limit_bytes, profile=False,
                        arch=config.arch)
    lock = await builtin_validation(inputs, settings=settings, work_root=output_dir / "validation", log=log,
                                    view=view, arch=arch, parent_env=dict(os.environ), autotune=config.autotune,
                                    spawner=spawner)
    summary = lock_summary(lock, None, None)
    if lock.passed:
        return None, summary
    failed = [check for check in lock.checks if check.status == "failed"]
    return ("bundle preflight failed: " + "; ".join(f"{check.name}: {check.message}" for check in failed)
            + f" (details: {lock.lock_path}); fix the bundle, or pass --skip-validation to run anyway"), summary
