"""`bundle.lock.json`: what `tlx-agent validate` (or optimize's built-in preflight) proved about a bundle.

The functions that write, load and match a lock live in `orchestrator/bundle/lock.py`; this module is only
the contract, so that `tlx-agent schema` can export it and readers need not import the orchestrator.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from protocol.base import StrictModel

LOCK_KIND = "tlx-agent-bundle-lock"
CheckStatus = Literal["passed", "failed", "skipped"]


class LockedFile(StrictModel):
    path: str
    sha256: str
    size: int


class CheckResult(StrictModel):
    name: str
    status: CheckStatus
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class CaseStability(StrictModel):
    """One case over the fresh benchmark workers: within-worker CV and between-worker median spread."""

    case_id: str
    protected: bool
    medians_us: list[float]
    cvs: list[float]
    samples: list[int]
    median_us: float | None
    median_spread: float | None  # (max - min) / median of the per-worker medians
    max_cv: float | None
    stable: bool


class BundleLock(StrictModel):
    kind: Literal["tlx-agent-bundle-lock"] = LOCK_KIND
    schema_version: Literal[1] = 1
    created_at: str
    mode: Literal["validate", "builtin"] = "validate"
    passed: bool
    failed_checks: list[str]
    files: dict[str, LockedFile]  # role (kernel, harness, cases, ...) -> the file validation read
    harness_functions: list[str]
    case_ids: list[str]
    protected_case_ids: list[str]
    target: dict[str, Any]
    settings: dict[str, Any]
    device: dict[str, Any]
    checks: list[CheckResult]
    stability: list[CaseStability] = Field(default_factory=list)
    versions: dict[str, Any] = Field(default_factory=dict)
    output_dir: str
    lock_path: str | None = None


class LockSummary(StrictModel):
    """What run.json records (as `bundle_lock`) about the validation a run relies on."""

    mode: Literal["validate", "builtin", "lock"]  # "lock": optimize --bundle-lock
    path: str | None
    sha256: str | None  # of the lock file itself, when one was passed
    created_at: str
    passed: bool
    checks: dict[str, CheckStatus]  # check name -> status
    files: dict[str, str]  # role -> sha256
    device: dict[str, Any]
    settings: dict[str, Any]
    # Only a --bundle-lock run has warnings; the key is absent otherwise, as readers of run.json expect.
    warnings: list[str] | None = Field(default=None, exclude_if=lambda value: value is None)
