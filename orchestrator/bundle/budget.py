"""The run's budget: the defaults for the kind of target, then target.json's, then the flags given, then
budget.json.

Every value's source is kept so that run.json (and the lock) say where each number came from: a reader of a
run on the CPU interpreter sees that its CV gate was the interpreter's stated default, not the GPU's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.bundle.arch import interpreter_requested
from protocol.bundle import (
    INTERPRETER_BUDGET,
    Budget,
    BudgetSource,
    BundleError,
    Target,
    describe_validation_error,
)

# Budget fields a target may state: how much a case may lose is a property of the workload, not of one run.
TARGET_BUDGET_FIELDS = ("max_case_regression",)


def resolve_budget(target: Target, given_flags: Mapping[str, Any], overrides: Mapping[str, Any]
                   ) -> tuple[Budget, dict[str, BudgetSource]]:
    """The budget and, per field, where its value came from. `given_flags` holds only the flags the user passed
    (None for the others); budget.json (`overrides`) wins over a flag, as it always has."""
    values: dict[str, Any] = {}
    sources: dict[str, BudgetSource] = dict.fromkeys(Budget.model_fields, "default")
    if interpreter_requested(target):  # TRITON_INTERPRET in target.json's environment
        values.update(INTERPRETER_BUDGET)
        sources.update(dict.fromkeys(INTERPRETER_BUDGET, "interpreter default"))
    for name in TARGET_BUDGET_FIELDS:
        if getattr(target, name) is not None:
            values[name] = getattr(target, name)
            sources[name] = "target.json"
    for name, value in given_flags.items():
        if value is not None:
            values[name] = value
            sources[name] = "command line"
    for name, value in overrides.items():
        values[name] = value
        sources[name] = "budget.json"
    try:
        return Budget.model_validate(values), sources
    except ValidationError as exc:
        raise BundleError(_describe_flag_error(exc, values, sources)) from None


def _describe_flag_error(exc: ValidationError, values: Mapping[str, Any], sources: Mapping[str, BudgetSource]) -> str:
    """Name what the user typed: the flag and its value (budget.json and target.json are checked, with their
    paths, when they are loaded, so a value that fails here came from the command line)."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else ""
    if sources.get(name) != "command line":
        return describe_validation_error(Path(str(sources.get(name, "budget"))), exc)
    value = values[name]
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f"--{name.replace('_', '-')} {shown}: {error['msg'].removeprefix('Value error, ').lower()} (see --help)"
