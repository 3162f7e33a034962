"""The resolved configuration of one run (what the CLI parsed, with paths made absolute)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from protocol.bundle import Budget


@dataclass
class RunConfig:
    kernel: Path
    harness: Path
    cases: Path
    target: Path
    output_dir: Path
    budget: Budget = field(default_factory=Budget)
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
    worker_python: str = sys.executable
    data_limit_bytes: int | None = None
    confidence: float = 0.99
    debug: bool = False
    bundle_lock: Path | None = None
    skip_validation: bool = True
    extra: dict[str, object] = field(default_factory=dict)
