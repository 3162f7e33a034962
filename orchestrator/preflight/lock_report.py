"""The lock document a preflight ends with: `bundle.lock.json` and the log lines that summarise it.

`build_lock` adds the last check (no input changed while validating) to the verdicts of
`orchestrator/preflight/checks.py`; the model itself is `orchestrator/bundle/lock.py`'s `BundleLock`.
"""

from __future__ import annotations

import importlib.metadata
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator.bundle.arch import DeviceView
from orchestrator.bundle.inputs import FROZEN_NAME_BY_ROLE, FrozenBundle, Inputs
from orchestrator.bundle.lock import LOCK_NAME, lock_files
from orchestrator.ledger.artifacts import write_json
from orchestrator.ledger.live_log import quote
from orchestrator.preflight.checks import failed_check, passed_check
from protocol.lock import BundleLock, CaseStability, CheckResult
from protocol.results import Evaluation


def _versions(evaluation: Evaluation | None) -> dict[str, Any]:
    versions: dict[str, Any] = {"orchestrator_python": sys.version.split()[0]}
    for name in ("tlx-agent", "trio", "pydantic"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    versions["worker"] = dict(evaluation.worker.versions) if evaluation else {}
    return versions


def build_lock(*, inputs: Inputs, bundle: FrozenBundle, settings: dict[str, Any], view: DeviceView,
               checks: list[CheckResult], stability: list[CaseStability], first: Evaluation | None,
               output_dir: Path, mode: str) -> BundleLock:
    """The lock of one preflight; `settings` is `Settings.to_json()` (orchestrator/preflight/runner.py)."""
    files = lock_files(inputs)
    # what the workers saw is the frozen copy; the lock names the originals, which must still hash the same
    drifted = [role for role, entry in files.items() if bundle.files.get(FROZEN_NAME_BY_ROLE[role]) != entry.sha256]
    if drifted:
        checks = [*checks, failed_check("bundle_unchanged", "input file(s) changed while validating: " + ", ".join(
            f"{role} {files[role].path}" for role in drifted) + "; validate again once they are final")]
    else:
        checks = [*checks, passed_check("bundle_unchanged", "no input file changed while validating")]
    failed = [check.name for check in checks if check.status == "failed"]
    device = view.to_json()
    device["worker_device"] = first.worker.device if first else None
    target = inputs.target
    return BundleLock(
        created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), mode=mode, passed=not failed,
        failed_checks=failed, files=files, harness_functions=list(inputs.harness_functions),
        case_ids=[c.case_id for c in inputs.cases], protected_case_ids=[c.case_id for c in inputs.cases if c.protected],
        target={"backend": target.backend, "architecture": target.architecture, "device": target.device,
                "main_scope": target.main_scope, "environment": dict(target.environment)},
        settings=settings, device=device, checks=checks, stability=stability, versions=_versions(first),
        output_dir=str(output_dir))


def report_lines(lock: BundleLock) -> list[str]:
    lines = [f"validate check={check.name} status={check.status} {quote(check.message, 600)}" for check in lock.checks]
    for row in lock.stability:
        lines.append(f"validate case={row.case_id} protected={row.protected} median_us="
                     f"{'n/a' if row.median_us is None else f'{row.median_us:.3f}'} spread="
                     f"{'n/a' if row.median_spread is None else f'{row.median_spread:.4f}'} worst_cv="
                     f"{'n/a' if row.max_cv is None else f'{row.max_cv:.4f}'} workers={len(row.medians_us)} "
                     f"stable={row.stable}")
    verdict = "PASSED" if lock.passed else f"FAILED ({', '.join(lock.failed_checks)})"
    lines.append(f"validate result={verdict}")
    return lines


def write_lock(lock: BundleLock, directory: Path) -> Path:
    """Write `lock` as `directory/bundle.lock.json`, recording that path in it; returns the path."""
    path = directory / LOCK_NAME
    lock.lock_path = str(path)
    write_json(path, lock)
    return path
