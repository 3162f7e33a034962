"""Reading what the HTML report needs from a run's output directory or a batch directory (the I/O edge).

A run's records are read leniently: a file that is absent, unreadable or from another version becomes a
note on the page, never a failed report, because the page is most wanted when a run went wrong. A batch's
batch.json is the page's whole subject, so an invalid one is an error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from orchestrator.text import one_line
from protocol.autotune import AutotuneRecord
from protocol.batch import BatchSummary
from protocol.results import Evaluation, ExperimentRecord, is_revalidation_id

EXPERIMENTS_ADAPTER: TypeAdapter[list[ExperimentRecord]] = TypeAdapter(list[ExperimentRecord])
REPORT_NAME = "report.html"


class HtmlReportError(Exception):
    """The page cannot be made; the message names the file and why."""


class _ResultRecords(BaseModel):
    """The parts of result.json the page reads beyond the completion report."""

    model_config = ConfigDict(extra="ignore")
    baseline: Evaluation | None = None
    final: Evaluation | None = None
    experiments: list[ExperimentRecord] = Field(default_factory=list)
    report: dict[str, Any] = Field(default_factory=dict)


class RunRecords(BaseModel):
    experiments: list[ExperimentRecord]
    budget: dict[str, Any]
    baseline: Evaluation | None
    final: Evaluation | None
    baseline_profiles: dict[str, Any] | None  # case id -> the harness's profile reply; None: no file
    best_profiles: dict[str, Any] | None
    notes: list[str]
    # experiment id -> seconds from the run's start to its decision (journal.jsonl); empty without a journal
    decision_seconds: dict[str, float] = Field(default_factory=dict)
    autotune: AutotuneRecord | None = None  # a kernel that autotunes itself (report.autotune)


def decision_seconds(path: Path) -> dict[str, float]:
    """When each experiment was decided, from the journal's timestamps: an `experiment` event per candidate, the
    final's last evaluation (its revalidation), relative to `run_started`. Unreadable lines are skipped: the
    times only place points on a plot."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    start: float | None = None
    found: dict[str, float] = {}
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or not isinstance(event.get("time"), (int, float)):
            continue
        if event.get("event") == "run_started" and start is None:
            start = float(event["time"])
        elif start is not None and isinstance(event.get("experiment_id"), str) and (
                event.get("event") == "experiment" or is_revalidation_id(event["experiment_id"])):
            found[event["experiment_id"]] = float(event["time"]) - start
    return found


def _json(path: Path, notes: list[str]) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        notes.append(f"{path} could not be read: {one_line(exc, 200)}")
        return None


def load_run_records(run_dir: Path | None) -> RunRecords:
    notes: list[str] = []
    if run_dir is None or not run_dir.is_dir():
        notes.append(f"output directory {run_dir} is not here: only the completion report is shown")
        return RunRecords(
            experiments=[],
            budget={},
            baseline=None,
            final=None,
            baseline_profiles=None,
            best_profiles=None,
            notes=notes,
        )
    result = _ResultRecords()
    document = _json(run_dir / "result.json", notes)
    if isinstance(document, dict):
        try:
            result = _ResultRecords.model_validate(document)
        except ValidationError as exc:
            notes.append(
                f"{run_dir / 'result.json'} has records this version cannot read: {one_line(exc, 200)}"
            )
    experiments = result.experiments
    listed = _json(
        run_dir / "experiments.json", notes
    )  # written as the run goes: present for unfinished runs
    if listed is not None:
        try:
            experiments = EXPERIMENTS_ADAPTER.validate_python(listed)
        except ValidationError as exc:
            notes.append(
                f"{run_dir / 'experiments.json'} is not readable as experiment records: {one_line(exc, 200)}"
            )
    manifest = _json(run_dir / "run.json", notes)
    budget = manifest.get("budget") if isinstance(manifest, dict) else None
    profiles = [_json(run_dir / name, notes) for name in ("baseline_profile.json", "best_profile.json")]
    return RunRecords(
        experiments=experiments,
        budget=budget if isinstance(budget, dict) else {},
        baseline=result.baseline,
        final=result.final,
        baseline_profiles=profiles[0] if isinstance(profiles[0], dict) else None,
        best_profiles=profiles[1] if isinstance(profiles[1], dict) else None,
        notes=notes,
        decision_seconds=decision_seconds(run_dir / "journal.jsonl"),
        autotune=_autotune(result.report, notes),
    )


def _autotune(report: dict[str, Any], notes: list[str]) -> AutotuneRecord | None:
    if not report.get("autotune"):
        return None
    try:
        return AutotuneRecord.model_validate(report["autotune"])
    except ValidationError as exc:
        notes.append(f"result.json's report.autotune is not readable: {one_line(exc, 200)}")
        return None


def is_batch_dir(path: Path) -> bool:
    return path.is_dir() and (path / "batch.json").is_file()


def load_batch(batch_dir: Path) -> BatchSummary:
    path = batch_dir / "batch.json"
    try:
        return BatchSummary.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise HtmlReportError(f"{path} cannot be read: {exc}") from None
    except ValidationError as exc:
        raise HtmlReportError(f"{path} is not a batch summary: {one_line(exc, 300)}") from None


def job_report_links(summary: BatchSummary, batch_dir: Path, page_dir: Path) -> dict[str, str]:
    """Job id -> the job's own report.html relative to the batch page, for jobs whose output dir has one."""
    links: dict[str, str] = {}
    for job in summary.jobs:
        report = (batch_dir / job.output_dir) / REPORT_NAME  # an absolute output_dir replaces batch_dir
        if report.is_file():
            links[job.job_id] = Path(os.path.relpath(report.resolve(), page_dir.resolve())).as_posix()
    return links
