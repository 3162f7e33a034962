"""JSON Schemas of every public model and of every document a command writes, for `tlx-agent schema`.

Two kinds of names, one mapping: models by name (the inputs, the worker messages and the result parts, as
`tlx-agent schema` has always printed them), and documents by the path a command writes them to under its
`--output-dir`, `<id>` standing for one experiment id. `tlx-agent validate` writes bundle.lock.json and the
frozen bundle/; optimize's built-in preflight writes the same under validation/. A journal.jsonl schema
describes one line. `error_document` is what any subcommand prints on stdout when it fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pydantic import TypeAdapter

from protocol.batch import BatchManifest, BatchSummary
from protocol.bundle import Budget, Case, Target
from protocol.commands import DoctorOutput, InitBundleOutput, SkillInstallOutput
from protocol.completion import CompletionReport
from protocol.errors import ErrorDocument
from protocol.journal import JournalEvent
from protocol.lock import BundleLock
from protocol.manifest import RunManifest
from protocol.profile import DiagnosticProfile, ExperimentProfiles, ProfileRequest, ProfilesByCase
from protocol.results import (
    CaseMeasurement,
    CommitRecord,
    Evaluation,
    ExperimentRecord,
    FinishedEvaluation,
    RunResult,
    SampleStats,
)
from protocol.summary import RunSummary
from protocol.worker import WorkerCommand, WorkerEvent

MODEL_SCHEMAS: dict[str, Any] = {
    "case": Case,
    "cases": list[Case],
    "target": Target,
    "budget": Budget,
    "profile_request": ProfileRequest,
    "worker_command": WorkerCommand,
    "worker_event": WorkerEvent,
    "sample_stats": SampleStats,
    "case_measurement": CaseMeasurement,
    "evaluation": Evaluation,
    "experiment": ExperimentRecord,
    "run_result": RunResult,
    "error_document": ErrorDocument,
    "init_bundle_output": InitBundleOutput,
    "doctor_output": DoctorOutput,
    "skill_install_output": SkillInstallOutput,
    "completion_report": CompletionReport,
    "run_summary": RunSummary,  # what optimize prints on stdout (result.json holds the whole RunResult)
    "batch_manifest": BatchManifest,  # the manifest `tlx-agent batch` reads (JSON or TOML)
}

_VALIDATION_DOCUMENTS: dict[str, Any] = {
    "bundle.lock.json": BundleLock,
    "bundle/cases.json": list[Case],
    "bundle/target.json": Target,
    "bundle/budget.json": Budget,
}

DOCUMENT_SCHEMAS: dict[str, Any] = {
    "result.json": RunResult,
    "run.json": RunManifest,
    "journal.jsonl": JournalEvent,
    "experiments.json": list[ExperimentRecord],
    "experiments/<id>/result.json": ExperimentRecord,
    "experiments/<id>/profile.json": ExperimentProfiles,
    "experiments/<id>/diagnostic_profile.json": DiagnosticProfile,
    "experiments/<id>/commit_revalidation.json": Evaluation,
    "experiments/<id>/evaluations/<tag>.json": FinishedEvaluation,
    "baseline_profile.json": ProfilesByCase,
    "best_profile.json": ProfilesByCase,
    "promotion_commits.json": list[CommitRecord],
    "auto_commit.json": CommitRecord,
    "rollback_commit.json": CommitRecord,
    "batch.json": BatchSummary,  # under `tlx-agent batch --output-dir`
    **_VALIDATION_DOCUMENTS,
    **{f"validation/{name}": source for name, source in _VALIDATION_DOCUMENTS.items()},
}

SCHEMA_SOURCES: dict[str, Any] = {**MODEL_SCHEMAS, **DOCUMENT_SCHEMAS}


def all_schemas() -> dict[str, Any]:
    return {name: TypeAdapter(source).json_schema() for name, source in SCHEMA_SOURCES.items()}


def document_name(relative_path: str, names: Iterable[str] = DOCUMENT_SCHEMAS) -> str | None:
    """The document name among `names` for a path relative to an output directory (None: no document)."""
    for name in names:
        # each <placeholder> stands for one path segment's text (an experiment id, an evaluation tag)
        if re.fullmatch(_segment_pattern(name), relative_path):
            return name
    return None


def _segment_pattern(name: str) -> str:
    return "".join("[^/]+" if piece.startswith("<") and piece.endswith(">") else re.escape(piece)
                   for piece in re.split(r"(<[a-z]+>)", name))
