"""JSON Schemas of every public model, for `tlx-agent schema`."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from protocol.bundle import Budget, Case, Target
from protocol.profile import ProfileRequest
from protocol.results import CaseMeasurement, Evaluation, ExperimentRecord, RunResult, SampleStats
from protocol.worker import WorkerCommand, WorkerEvent

SCHEMA_SOURCES: dict[str, Any] = {
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
}


def all_schemas() -> dict[str, Any]:
    return {name: TypeAdapter(source).json_schema() for name, source in SCHEMA_SOURCES.items()}
