"""DIR/batch.json: the batch's system of record, rewritten atomically at every job state change.

Each write goes to a temporary file that is fsynced, renamed over batch.json, and the folder fsynced, so a
batch killed at any instant leaves the previous or the next summary, never half of one. An exclusive lock
on DIR/.batch.lock keeps two batches (say, two `--resume`s) from writing the same folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.batch.manifest import ResolvedJob
from orchestrator.batch.policy import is_kept_on_resume
from protocol.batch import BatchSummary, JobStatus, JobSummary

SUMMARY_NAME = "batch.json"
LOCK_NAME = ".batch.lock"
JOBS_DIR = "jobs"


class BatchDirError(ValueError):
    """The output directory cannot hold this batch; the message says what to do."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a power loss
    finally:
        os.close(directory)


def read_previous_summary(output_dir: Path, resume: bool) -> BatchSummary | None:
    """Check DIR for a new batch (missing or empty) or a resumed one (its batch.json); the summary to
    continue from, None for a fresh start. `--resume` on a missing or empty DIR is a fresh start."""
    if output_dir.exists() and not output_dir.is_dir():
        raise BatchDirError(f"--output-dir {output_dir} is not a directory")
    entries = sorted(p.name for p in output_dir.iterdir()) if output_dir.exists() else []
    if not entries:
        return None
    summary_path = output_dir / SUMMARY_NAME
    if not resume:
        raise BatchDirError(f"--output-dir {output_dir} is not empty; pass --resume to continue the batch "
                            "recorded there, or choose a new directory")
    if not summary_path.exists():
        raise BatchDirError(f"--output-dir {output_dir} is not empty and has no {SUMMARY_NAME} to resume")
    try:
        return BatchSummary.model_validate_json(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        raise BatchDirError(f"cannot resume: {summary_path} is unreadable: {exc}".splitlines()[0]) from None


def recorded_exit_code(job_json: Path) -> int | None:
    """The `exit_code` a job printed (its stdout JSON); None when missing, truncated or not a result."""
    try:
        value = json.loads(job_json.read_text(encoding="utf-8")).get("exit_code")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def starting_jobs(jobs: Sequence[ResolvedJob], previous: BatchSummary | None, jobs_dir: Path) -> list[JobSummary]:
    """The summary's jobs before anything runs: a resumed job whose finish is confirmed by its JSON keeps its
    record; every other job (new, pending, running, interrupted) is pending, its attempt count carried."""
    earlier = {job.job_id: job for job in previous.jobs} if previous else {}
    summaries = []
    for job in jobs:
        before = earlier.get(job.job_id)
        if is_kept_on_resume(before, recorded_exit_code(jobs_dir / f"{job.job_id}.json")):
            summaries.append(before)
            continue
        summaries.append(JobSummary(job_id=job.job_id, kernel=job.kernel, output_dir=str(jobs_dir / job.job_id),
                                    attempts=before.attempts if before else 0))
    return summaries


@contextlib.contextmanager
def locked(output_dir: Path) -> Iterator[None]:
    """Hold DIR/.batch.lock for the batch's life; the kernel drops it when the process dies, even by SIGKILL."""
    with (output_dir / LOCK_NAME).open("a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BatchDirError(f"another batch is running in {output_dir} (it holds {LOCK_NAME})") from None
        yield


class BatchLedger:
    """The in-memory summary and its file; every change is written before the call returns.

    Only the batch's main loop calls it (trio tasks of one thread, or the Dask client loop), so it needs no lock.
    """

    def __init__(self, path: Path, summary: BatchSummary, log: Callable[[str], None]) -> None:
        self.path = path
        self.summary = summary
        self._log = log
        self._write()

    def note(self, line: str) -> None:
        """A line for the batch's log that changes no job."""
        self._log(line)

    def job(self, job_id: str) -> JobSummary:
        return next(job for job in self.summary.jobs if job.job_id == job_id)

    def started(self, job_id: str, gpu: str | None, node: str | None) -> int:
        """Mark the job running; its attempt number (1 for the first run)."""
        job = self.job(job_id)
        self._update(job, status=JobStatus.RUNNING, attempts=job.attempts + 1, gpu=gpu, node=node, exit_code=None,
                     speedup=None, error=None, wall_seconds=None)
        self._log(f"batch job={job_id} status=running attempt={job.attempts} gpu={gpu} node={node}")
        return job.attempts

    def finished(self, job_id: str, **outcome: Any) -> None:
        """Record a job's end: status, exit_code, speedup, error, wall_seconds, and where it ran."""
        job = self.job(job_id)
        self._update(job, **outcome)
        speedup = f" speedup={job.speedup:.4f}x" if job.speedup is not None else ""
        error = f" error={job.error!r}" if job.error else ""
        self._log(f"batch job={job_id} status={job.status.value} exit_code={job.exit_code}{speedup}{error}")

    def close(self, exit_code: int) -> None:
        self.summary.exit_code = exit_code
        self.summary.finished = now_iso()
        self._write()

    def _update(self, job: JobSummary, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(job, name, value)  # validated: the models are strict with validate_assignment
        self._write()

    def _write(self) -> None:
        write_atomically(self.path, json.dumps(self.summary.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
