"""The run's budget: the defaults for the kind of target, then the flags given, then budget.json.

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


def resolve_budget(target: Target, given_flags: Mapping[str, Any], overrides: Mapping[str, Any]
                   ) -> tuple[Budget, dict[str, BudgetSource]]:
    """The budget and, per field, where its value came from. `given_flags` holds only the flags the user passed
    (None for the others); budget.json (`overrides`) wins over a flag, as it always has."""
    values: dict[str, Any] = {}
    sources: dict[str, BudgetSource] = dict.fromkeys(Budget.model_fields, "default")
    if interpreter_requested(target):  # TRITON_INTERPRET in target.json's environment
        values.update(INTERPRETER_BUDGET)
        sources.update(dict.fromkeys(INTERPRETER_BUDGET, "interpreter default"))
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
        raise BundleError(describe_validation_error(Path("command line"), exc)) from None
