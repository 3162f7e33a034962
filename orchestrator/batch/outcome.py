"""What one finished job amounts to, read from its exit code, its stdout JSON and its log (pure parsing).

optimize prints one JSON document on stdout: the run's summary (with `aggregate_speedup`) or the error
document (with `error`). A job killed by a signal printed nothing readable; its log's last line says the most.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from orchestrator.batch.policy import exit_description, job_status
from protocol.batch import JobStatus

ERROR_CHARACTERS = 300  # one line in batch.json, not a traceback


class JobOutcome(BaseModel):
    """The JobSummary fields a finished job sets; what a Dask task sends back to the batch."""

    status: JobStatus
    exit_code: int | None  # None: the job never started
    speedup: float | None = None
    error: str | None = None
    wall_seconds: float
    gpu: str | None = None
    node: str | None = None


def parse_document(text: str) -> dict[str, Any] | None:
    """optimize's stdout document; None when empty, truncated or not an object."""
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def aggregate_speedup(document: dict[str, Any] | None) -> float | None:
    """optimize's stdout summary carries it at the top; a whole result (older versions' stdout) in `report`."""
    report = (document or {}).get("report")
    value = (document or {}).get("aggregate_speedup", report.get("aggregate_speedup") if isinstance(report, dict)
                                 else None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= ERROR_CHARACTERS else line[: ERROR_CHARACTERS - 3] + "..."


def interpret(exit_code: int, document: dict[str, Any] | None, log_tail: str,
              result_speedup: float | None = None) -> tuple[JobStatus, float | None, str | None]:
    """(status, speedup, error) of a job. The document must agree with the exit code to count as readable;
    the speedup comes from the document, else from the run's result.json (`result_speedup`)."""
    readable = document is not None and document.get("exit_code") == exit_code
    status = job_status(exit_code, readable)
    speedup = aggregate_speedup(document) if readable else None
    speedup = speedup if speedup is not None else result_speedup
    if status in (JobStatus.IMPROVED, JobStatus.NO_IMPROVEMENT):
        return status, speedup, None
    reason = (document or {}).get("error") if readable else None
    if not isinstance(reason, str) or not reason.strip():
        reason = last_line(log_tail) or "no output"
    prefix = exit_description(exit_code)
    if exit_code in (0, 2, 3) and not readable:
        prefix += ", its result JSON unreadable"
    return status, speedup, one_line(f"{prefix}: {reason}")
