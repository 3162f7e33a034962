"""A batch of optimize jobs: the manifest a user writes and the summary `tlx-agent batch` keeps.

`BatchManifest` is read from JSON or TOML; every job names one kernel and its bundle, and may override any
optimize option (`options`, the long flag names without dashes, e.g. `max_total_seconds`). `defaults.options`
applies to every job that does not set the option itself. `BatchSummary` is DIR/batch.json: rewritten
atomically whenever a job changes state, so a killed batch leaves a readable summary, and the record a
`--resume` continues from.
"""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import Any

from pydantic import Field, field_validator

from protocol.base import StrictModel
from protocol.outcome import ExitCode

BATCH_VERSION = 1
JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class JobSpec(StrictModel):
    """One kernel to optimize: paths are relative to the manifest's folder unless absolute."""

    job_id: str = Field(pattern=JOB_ID_PATTERN)
    kernel: str
    harness: str
    cases: str
    target: str
    bundle_lock: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class BatchDefaults(StrictModel):
    options: dict[str, Any] = Field(default_factory=dict)


class BatchManifest(StrictModel):
    version: int = BATCH_VERSION
    defaults: BatchDefaults = Field(default_factory=BatchDefaults)
    jobs: list[JobSpec] = Field(min_length=1)

    @field_validator("jobs")
    @classmethod
    def _unique_ids(cls, jobs: list[JobSpec]) -> list[JobSpec]:
        seen: set[str] = set()
        for job in jobs:
            if job.job_id in seen:
                raise ValueError(f"job_id {job.job_id!r} appears twice")
            seen.add(job.job_id)
        return jobs


class BatchExitCode(IntEnum):
    """The exit codes `tlx-agent batch` returns: a subset of protocol.outcome.ExitCode, with the same meanings."""

    ALL_IMPROVED = ExitCode.OK  # every job improved its kernel
    ERROR = ExitCode.ERROR  # invalid manifest, output directory or arguments: no job ran
    NONE_IMPROVED = ExitCode.NO_WINNER  # no job improved (failures included)
    SOME_IMPROVED = ExitCode.SOME_IMPROVED  # some jobs improved, others did not or failed
    INTERRUPTED = ExitCode.INTERRUPTED  # Ctrl-C or SIGTERM: unfinished jobs stay pending or running for --resume


class JobStatus(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    IMPROVED = "improved"  # optimize exit 0: a winner promoted, revalidated (and committed if asked)
    NO_IMPROVEMENT = "no_improvement"  # optimize exit 2
    COMMIT_FAILED = "commit_failed"  # optimize exit 3
    FAILED = "failed"  # optimize exit 1, a crash, a bad bundle, or a job that could not start

    @property
    def finished(self) -> bool:
        return self not in (JobStatus.PENDING, JobStatus.RUNNING)


class JobSummary(StrictModel):
    job_id: str
    kernel: str
    status: JobStatus = JobStatus.PENDING
    exit_code: int | None = None
    speedup: float | None = None  # the run's aggregate speedup over its baseline, when it has one
    output_dir: str
    error: str | None = None  # one line: why a failed job failed
    gpu: str | None = None  # the CUDA_VISIBLE_DEVICES the job ran with (None on a CPU)
    node: str | None = None  # the host that ran it
    attempts: int = 0
    wall_seconds: float | None = None


class BatchSummary(StrictModel):
    version: int = BATCH_VERSION
    manifest: str
    output_dir: str
    started: str
    finished: str | None = None
    exit_code: int | None = None
    engine: str = "local"
    jobs: list[JobSummary]
