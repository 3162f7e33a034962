"""The resolved configuration of one run (what the CLI parsed, with paths made absolute)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from protocol.autotune import AutotuneRecord
from protocol.bundle import Budget


@dataclass
class RunConfig:
    kernel: Path
    harness: Path
    cases: Path
    target: Path
    output_dir: Path
    budget: Budget = field(default_factory=Budget)
    budget_sources: dict[str, str] = field(default_factory=dict)  # field -> default / interpreter default / ...
    budget_file: Path | None = None
    provider: str = "tune"
    replay_dir: Path | None = None
    model: str | None = None
    base_url: str | None = None
    profile: bool = True
    diagnostic_instrumentation: bool = False
    reference_kernel: Path | None = None
    arch: str | None = None
    vcs: Literal["auto", "git", "hg"] = "auto"
    commit_message: str | None = None
    commit_winner: bool = True
    prior_run: Path | None = None
    isolation: Literal["strict", "standard", "off"] = "standard"
    schedule: str = "aba"
    confirm_pairs: int = 2  # extra candidate/incumbent pairs when only the noise gate fails
    triage: bool = True  # a candidate's first run may reject it against the incumbent's last run
    reuse_incumbent_run: bool = True  # with triage, that last run is the first incumbent run of the A/B/A
    overlap_compile_ahead: bool = True  # a round's candidates compiled ahead together, from the round's start
    worker_python: str = sys.executable
    # "forkserver": workers forked by a per-run server that imported torch and triton once
    # (sandbox_worker/forkserver.py); "fresh": a new interpreter per worker
    worker_start: Literal["fresh", "forkserver"] = "forkserver"
    data_limit_bytes: int | None = None
    confidence: float = 0.99
    debug: bool = False
    bundle_lock: Path | None = None
    skip_validation: bool = False
    argv: list[str] = field(default_factory=list)  # the command line, as recorded in run.json and the journal
    # Filled by the preflight before the run starts (recorded in run.json):
    isolation_probe: dict[str, str] = field(default_factory=dict)  # layer -> active/degraded/unavailable
    bundle_lock_summary: dict[str, Any] | None = None  # what validation checked (lock or built-in preflight)
    refused_environment: list[str] = field(default_factory=list)  # target.json environment names not passed on
    # the untouched kernel's own autotune, run once before the preflight (orchestrator/autotune/): its choice per
    # key, pinned in every worker; None when the kernel has no autotune list to choose from
    autotune: AutotuneRecord | None = None
