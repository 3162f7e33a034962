"""Read what a run recorded, for a replay of its decisions: an output directory or a bare result.json (or a
measurement study's runs, `load_study`).

An output directory gives experiments.json (every ExperimentRecord, rewritten after each one), run.json (the
settings decisions depend on), journal.jsonl (one event per line, appended and fsynced) and, once the run has
finished, result.json (the cases). A bare result.json, like those in docs/data, gives experiments and cases
only. Anything unreadable or invalid raises `RecordsError` naming the file (and line). A crash can tear only
the journal's last line: that one is reported in `warnings` and left out; a bad line anywhere else is an
error. The journal is checked against the records: the order of its benchmarked runs is the order the
noise history is rebuilt in, and its decisions must be the recorded ones.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from orchestrator.decision.simulate import BENCHMARKED_LABELS, RecordedSettings
from orchestrator.decision.study import StudyMeasurement
from protocol.base import StrictModel
from protocol.bundle import Case, describe_validation_error
from protocol.results import CaseReport, Decision, ExperimentRecord

# How the docs/data results that were trimmed by hand stand in for their raw samples.
DROPPED_SAMPLES = re.compile(r"^\d+ samples \(dropped here; stats kept\)$")


class RecordsError(Exception):
    """The records cannot be read; the message names the file (and line) and what is wrong."""


class JournalEntry(BaseModel):
    """One journal line; the fields a replay reads are typed, the rest are kept as they are."""

    model_config = ConfigDict(extra="allow")

    line: int
    event: str
    experiment_id: str | None = None
    label: str | None = None
    tag: str | None = None
    status: str | None = None
    decision: Decision | None = None
    aggregate_speedup: float | None = None


class RunRecords(StrictModel):
    source: str
    experiments: list[ExperimentRecord]
    cases: list[Case]
    settings: RecordedSettings
    journal: list[JournalEntry] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class _Report(BaseModel):
    model_config = ConfigDict(extra="ignore")
    workload: list[CaseReport]


class _Result(BaseModel):
    """The parts of result.json a replay reads (the rest may be from an older or newer version)."""

    model_config = ConfigDict(extra="ignore")
    experiments: list[ExperimentRecord]
    report: _Report | None = None


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordsError(f"{path} cannot be read: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordsError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _restore_dropped_samples(experiments: Any) -> int:
    """Replace the docs/data stand-in for dropped samples by an empty list; returns how many there were."""
    dropped = 0
    for experiment in experiments if isinstance(experiments, list) else []:
        evaluations = experiment.get("evaluations") if isinstance(experiment, dict) else None
        for evaluation in evaluations if isinstance(evaluations, list) else []:
            cases = evaluation.get("cases") if isinstance(evaluation, dict) else None
            for case in cases if isinstance(cases, list) else []:
                if isinstance(case, dict) and isinstance(case.get("samples_us"), str) \
                        and DROPPED_SAMPLES.match(case["samples_us"]):
                    case["samples_us"] = []
                    dropped += 1
    return dropped


def _dropped_warning(path: Path, dropped: int) -> list[str]:
    return [f"{path}: {dropped} case measurement(s) kept their statistics but not their raw samples; the noise "
            "test of those decisions cannot be re-run (its gate is carried from the record)"] if dropped else []


def _cases_from(experiments: list[ExperimentRecord], report: _Report | None, path: Path) -> list[Case]:
    """The run's cases in their order: the report's, else the baseline run's (decisions need no parameters)."""
    if report is not None:
        return [Case(case_id=c.case_id, parameters=c.parameters, weight=c.weight, protected=c.protected)
                for c in report.workload]
    baseline = next((e for e in experiments if e.experiment_id == "baseline" and e.evaluations), None)
    if baseline is None:
        raise RecordsError(f"{path}: no baseline experiment with a run, so the run's cases are unknown")
    return [Case(case_id=m.case_id, weight=m.weight, protected=m.protected) for m in baseline.evaluations[0].cases]


def load_result_file(path: Path) -> RunRecords:
    """A bare result.json: its experiments and cases; the settings are the run's defaults."""
    payload = _read_json(path)
    if not isinstance(payload, dict):
        raise RecordsError(f"{path}: a result.json is a JSON object, got {type(payload).__name__}")
    dropped = _restore_dropped_samples(payload.get("experiments"))
    try:
        result = _Result.model_validate(payload)
    except ValidationError as exc:
        raise RecordsError(describe_validation_error(path, exc)) from None
    return RunRecords(source=str(path), experiments=result.experiments,
                      cases=_cases_from(result.experiments, result.report, path), settings=RecordedSettings(),
                      warnings=_dropped_warning(path, dropped))


def load_settings(path: Path) -> RecordedSettings:
    manifest = _read_json(path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("budget"), dict):
        raise RecordsError(f"{path}: run.json must be an object with a 'budget' object")
    budget = manifest["budget"]
    found = {"min_speedup": budget.get("min_speedup"), "max_cv": budget.get("max_cv"),
             "max_case_regression": budget.get("max_case_regression"),
             "schedule": manifest.get("schedule"), "confirm_pairs": manifest.get("confirm_pairs"),
             "triage": manifest.get("triage"), "reuse_incumbent_run": manifest.get("reuse_incumbent_run")}
    try:
        return RecordedSettings(source=str(path), **{k: v for k, v in found.items() if v is not None})
    except ValidationError as exc:
        raise RecordsError(describe_validation_error(path, exc)) from None


def load_journal(path: Path) -> tuple[list[JournalEntry], list[str]]:
    """Every line of journal.jsonl; a torn last line becomes a warning, any other bad line an error."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordsError(f"{path} cannot be read: {exc}") from None
    entries: list[JournalEntry] = []
    for number, line in enumerate(lines, start=1):
        try:
            fields = json.loads(line)
            if not isinstance(fields, dict):
                raise ValueError(f"a journal line is a JSON object, got {type(fields).__name__}")
            entries.append(JournalEntry.model_validate({**fields, "line": number}))
        except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
            if number == len(lines):
                return entries, [f"{path} line {number} is torn (the run stopped while writing it); left out"]
            problem = describe_validation_error(path, exc) if isinstance(exc, ValidationError) else str(exc)
            raise RecordsError(f"{path} line {number} is unreadable ({problem}); the journal is damaged") from None
    return entries, []


def _benchmarked_runs(experiments: list[ExperimentRecord]) -> list[tuple[str, str]]:
    return [(e.experiment_id, run.label) for e in experiments for run in e.evaluations
            if run.label in BENCHMARKED_LABELS and run.status.value == "ok"]


def check_journal(path: Path, journal: list[JournalEntry], experiments: list[ExperimentRecord]) -> list[str]:
    """Where the journal and the records disagree (the replay trusts the records and says so)."""
    warnings = []
    journaled = [(e.experiment_id or "", e.label or "") for e in journal
                 if e.event == "evaluation" and e.label in BENCHMARKED_LABELS and e.status == "ok"]
    recorded = _benchmarked_runs(experiments)
    mismatch = next((i for i, (a, b) in enumerate(zip(journaled, recorded, strict=False)) if a != b), None)
    if mismatch is not None:
        warnings.append(f"{path}: benchmarked run {mismatch} is {journaled[mismatch]} in the journal but "
                        f"{recorded[mismatch]} in the records; the noise history follows the records")
    elif len(journaled) != len(recorded):
        warnings.append(f"{path}: {len(journaled)} benchmarked runs in the journal, {len(recorded)} in the records "
                        "(a run in flight when the run stopped is not in the records)")
    by_id = {e.experiment_id: e for e in experiments}
    for entry in journal:
        if entry.event != "experiment":
            continue
        record = by_id.get(entry.experiment_id or "")
        if record is None:
            warnings.append(f"{path} line {entry.line}: experiment {entry.experiment_id!r} is not in the records")
        elif entry.decision != record.decision or entry.aggregate_speedup != record.aggregate_speedup:
            warnings.append(f"{path} line {entry.line}: the decision on {entry.experiment_id} differs from the "
                            "record's")
    return warnings


def load_output_dir(directory: Path) -> RunRecords:
    listing = directory / "experiments.json"
    if not listing.is_file():
        raise RecordsError(f"{listing} does not exist; pass a run's output directory or a result.json")
    payload = _read_json(listing)
    dropped = _restore_dropped_samples(payload)
    try:
        experiments = TypeAdapter(list[ExperimentRecord]).validate_python(payload)
    except ValidationError as exc:
        raise RecordsError(describe_validation_error(listing, exc, prefix="experiment ")) from None
    report = None
    result_path = directory / "result.json"
    if result_path.is_file():
        result = _read_json(result_path)
        try:
            report = _Report.model_validate(result.get("report")) if isinstance(result, dict) else None
        except ValidationError as exc:
            raise RecordsError(describe_validation_error(result_path, exc, prefix="report: ")) from None
    warnings = _dropped_warning(listing, dropped)
    manifest = directory / "run.json"
    settings = load_settings(manifest) if manifest.is_file() else RecordedSettings()
    journal: list[JournalEntry] = []
    journal_path = directory / "journal.jsonl"
    if journal_path.is_file():
        journal, torn = load_journal(journal_path)
        warnings += torn + check_journal(journal_path, journal, experiments)
    else:
        warnings.append(f"{journal_path} does not exist: the run order of the records is not checked")
    return RunRecords(source=str(directory), experiments=experiments, cases=_cases_from(experiments, report, listing),
                      settings=settings, journal=journal, warnings=warnings)


def load_records(path: Path) -> RunRecords:
    """An output directory, or a result.json on its own."""
    if path.is_dir():
        return load_output_dir(path)
    if path.is_file():
        return load_result_file(path)
    raise RecordsError(f"{path} does not exist; pass a run's output directory or a result.json")


def is_study(path: Path) -> bool:
    """A measurement study's directory: runs_<example>_<process>.json files and no run's experiments.json."""
    return path.is_dir() and not (path / "experiments.json").exists() and any(path.glob("runs_*.json"))


def load_study(directory: Path) -> list[StudyMeasurement]:
    """Every runs_*.json of a measurement study (scripts/measurement_study.py), in name order."""
    measurements = []
    for path in sorted(directory.glob("runs_*.json")):
        payload = _read_json(path)
        try:
            measurements.append(StudyMeasurement.model_validate(payload))
        except ValidationError as exc:
            raise RecordsError(describe_validation_error(path, exc)) from None
    if not measurements:
        raise RecordsError(f"{directory} holds no runs_*.json; pass a measurement study's directory")
    return measurements
