"""run.json: what a reader needs to trust or reproduce a run (inputs, hashes, versions, isolation, device).

`orchestrator/run/manifest.py: run_manifest` builds it once the bundle is frozen. The keys are a
published format (readers' scripts depend on them): add fields, never rename one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from protocol.autotune import AutotuneRecord
from protocol.base import StrictModel
from protocol.bundle import Budget, BudgetSource, Target
from protocol.lock import LockSummary

# The version of what a run writes into its output directory (run.json, experiments.json, journal.jsonl, the
# commit trailer), as far as `tlx-agent optimize --resume` depends on it. Runs written before resume existed
# carry no `record_format` and read as 0: they cannot be resumed (docs/resume.md).
RECORD_FORMAT = 1


class InputPaths(StrictModel):
    """The files the command line named, as absolute paths (null: not given)."""

    kernel: str
    harness: str
    cases: str
    target: str
    budget: str | None
    reference_kernel: str | None


class FrozenBundleRecord(StrictModel):
    """The read-only copy of the inputs that every worker of the run reads."""

    directory: str
    sha256: dict[str, str]  # frozen file name (kernel.py, cases.json, ...) -> sha256
    sources: dict[str, str]  # frozen file name -> the path it was copied from


class IsolationRecord(StrictModel):
    """Isolation layer (filesystem, network, rlimits, ...) -> its status, as probed and as the baseline worker saw it."""

    probe: dict[str, str]
    baseline_worker: dict[str, str]


class HostRecord(StrictModel):
    platform: str
    python: str
    machine: str


class RunManifest(StrictModel):
    run_id: str
    started_at: str  # UTC, ISO 8601
    command: list[str]
    inputs: InputPaths
    bundle: FrozenBundleRecord
    budget: Budget
    # where each budget value came from: default, interpreter default, command line or budget.json
    budget_sources: dict[str, BudgetSource]
    confidence: float  # of the promotion test
    provider: str
    model: str | None
    profile: bool
    diagnostic_instrumentation: bool
    isolation_mode: Literal["strict", "standard", "off"]
    isolation: IsolationRecord
    refused_environment: list[str]  # target.json environment names not passed to workers
    schedule: str
    confirm_pairs: int
    triage: bool = False  # absent (False) in runs older than triage
    reuse_incumbent_run: bool = False  # absent (False) in runs older than the reuse
    overlap_compile_ahead: bool = False  # absent (False) in runs older than the overlap
    skip_validation: bool
    bundle_lock: LockSummary | None  # null with --skip-validation
    host: HostRecord
    versions: dict[str, str | None]  # package -> installed version (null: not installed)
    # what the baseline's worker ran: its interpreter (`executable`, `python`), torch, triton, `triton_tlx`
    worker_versions: dict[str, str | None] = Field(default_factory=dict)
    target: Target
    device: str | None  # what the baseline's worker reported
    record_format: int = 0  # RECORD_FORMAT of the run that wrote it; absent (0) in runs older than resume
    working_directory: str | None = None  # where the command ran: the recorded command's relative paths start here
    # a kernel that autotunes itself: the choice per key its trusted step made, pinned in every worker
    autotune: AutotuneRecord | None = None
