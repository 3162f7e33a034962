"""`bundle.lock.json`: what `tlx-agent validate` proved about a bundle, and matching it before a run.

The lock names every input by absolute path and sha256 (kernel included: validation ran on those bytes),
the harness functions, the case ids, every check with its result, the versions and the device. `optimize
--bundle-lock` accepts a lock only when it passed and every file still hashes the same; anything else
stops the run with one line naming the file, because a bundle that changed after validation is not the
bundle that was validated (a bundle is never silently reused for nearby inputs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.bundle.inputs import Inputs, sha256_file
from protocol.bundle import BundleError, describe_validation_error
from protocol.lock import LOCK_KIND, BundleLock, LockedFile, LockSummary

LOCK_NAME = "bundle.lock.json"
# role in the lock -> the CLI flag that names that file
ROLE_FLAGS = {"kernel": "--kernel", "harness": "--harness", "cases": "--cases", "target": "--target",
              "budget": "--budget", "reference_kernel": "--reference-kernel"}


def input_files(inputs: Inputs) -> dict[str, Path]:
    """Role -> absolute path of every file the run depends on."""
    return {role: path.resolve() for role, path in inputs.paths_by_role().items()}


def lock_files(inputs: Inputs) -> dict[str, LockedFile]:
    return {role: LockedFile(path=str(path), sha256=sha256_file(path), size=path.stat().st_size)
            for role, path in input_files(inputs).items()}


def load_lock(path: Path) -> BundleLock:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"--bundle-lock {path} does not exist; run tlx-agent validate first") from None
    except IsADirectoryError:
        raise BundleError(f"--bundle-lock {path} is a directory; pass the {LOCK_NAME} file itself") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"--bundle-lock {path} cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise BundleError(f"--bundle-lock {path} is not valid JSON (line {exc.lineno}: {exc.msg}); "
                          "re-run tlx-agent validate") from None
    if not isinstance(payload, dict) or payload.get("kind") != LOCK_KIND:
        raise BundleError(f"--bundle-lock {path} is not a {LOCK_NAME} written by tlx-agent validate")
    try:
        return BundleLock.model_validate(payload)
    except ValidationError as exc:
        raise BundleError(describe_validation_error(path, exc)) from None


def match_lock(lock: BundleLock, lock_path: Path, inputs: Inputs) -> None:
    """Raise `BundleError` naming the first file (or fact) in which the run differs from the lock."""
    if not lock.passed:
        raise BundleError(f"{lock_path} records failed checks ({', '.join(lock.failed_checks)}); fix the bundle "
                          "and re-run tlx-agent validate")
    current = input_files(inputs)
    for role, path in current.items():
        flag = ROLE_FLAGS[role]
        entry = lock.files.get(role)
        if entry is None:
            raise BundleError(f"{lock_path} does not cover {flag} {path}; re-run tlx-agent validate with {flag}")
        if Path(entry.path) != path:
            raise BundleError(f"{lock_path} was written for {role} {entry.path}, but {flag} is {path}; "
                              "pass the locked file or re-run tlx-agent validate")
        try:
            digest = sha256_file(path)
        except OSError as exc:
            raise BundleError(f"{role} file {path} cannot be read ({exc})") from None
        if digest != entry.sha256:
            raise BundleError(f"{role} file {path} changed since {lock_path} was written (sha256 {digest[:12]} "
                              f"!= locked {entry.sha256[:12]}); re-run tlx-agent validate")
    for role in sorted(set(lock.files) - set(current)):
        raise BundleError(f"{lock_path} covers {role} {lock.files[role].path}, but this run has no "
                          f"{ROLE_FLAGS.get(role, role)}; pass the same inputs as validate")


def lock_summary(lock: BundleLock, lock_path: Path | None, digest: str | None) -> dict[str, Any]:
    """What run.json records about the validation this run relies on (a `LockSummary`, as the dict the run config
    carries: the preflight adds `warnings` to it)."""
    summary = LockSummary(mode=lock.mode if lock_path is None else "lock",
                          path=str(lock_path) if lock_path else lock.lock_path,
                          sha256=digest, created_at=lock.created_at, passed=lock.passed,
                          checks={check.name: check.status for check in lock.checks},
                          files={role: entry.sha256 for role, entry in lock.files.items()}, device=lock.device,
                          settings=lock.settings)
    return summary.model_dump(mode="json")
