"""The user's bundle: cases.json, target.json and budget.json.

Each loader returns validated models or raises `BundleError` whose message names the file, the field
and what to do, so the CLI can print one clear line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, TypeAdapter, ValidationError, field_validator

from protocol.base import StrictModel


class BundleError(Exception):
    """A bundle input is missing or invalid; the message is meant for the user as is."""


class Case(StrictModel):
    """One workload. Every protected case must pass for any candidate to be promoted."""

    case_id: str = Field(min_length=1, max_length=200)
    parameters: dict[str, Any] = Field(default_factory=dict)
    weight: float = 1.0
    protected: bool = True

    @field_validator("weight")
    @classmethod
    def _weight_positive_finite(cls, value: float) -> float:
        if not math.isfinite(value) or value <= 0:
            raise ValueError("weight must be a finite number > 0")
        return value


# Backends whose workers run on an NVIDIA GPU; anything else runs on the Triton CPU interpreter. The worker,
# on the standard library only, spells the same in sandbox_worker/harness_kit/entry_point.py (a test holds
# the two together).
GPU_BACKENDS = ("cuda", "nvidia")


def runs_on_gpu(backend: str) -> bool:
    return backend.lower() in GPU_BACKENDS


class Target(StrictModel):
    """Backend, hardware and environment of the run (target.json)."""

    backend: str = Field(min_length=1)
    architecture: str = Field(min_length=1)
    device: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    optimization_guidance: str = ""
    main_scope: str | None = None
    # Where verdicts are computed for a harness that declares JUDGE: "judge" (a process the candidate cannot
    # reach: per-call on the CPU interpreter, record and replay on a GPU), "candidate" (the harness's own
    # verify/benchmark in the candidate's process). "auto" is the judge, except when the untouched kernel fails
    # under it and passes in its own process: then the run says so and stays there (worker/verdict_fallback.py).
    verdict_process: Literal["auto", "judge", "candidate"] = "auto"
    # A candidate whose GPU time moves out of the `main_scope` kernel (a library call, another kernel) is
    # vetoed (orchestrator/decision/profile_rules.py) unless this says that is intended.
    allow_work_outside_main_scope: bool = False
    # The largest loss a protected case may show beyond its noise (a fraction: 0.02 = 2 %); the run's default
    # when absent. `--max-case-regression` and budget.json override it.
    max_case_regression: float | None = Field(default=None, ge=0.0, le=1.0)
    # Accepted so bundles written for other tools load; recorded, not interpreted.
    optimization_skills: list[str] = Field(default_factory=list)
    supported_experiment_kinds: list[str] = Field(default_factory=lambda: ["promotable", "human_review"])
    evaluation_policy: dict[str, Any] = Field(default_factory=dict)


class Budget(StrictModel):
    """Numeric run limits; budget.json may override any of them, key by key."""

    max_rounds: int = Field(default=5, gt=0)
    candidates_per_round: int = Field(default=2, gt=0)
    max_candidate_seconds: float = Field(default=600.0, gt=0)
    max_total_seconds: float = Field(default=3600.0, gt=0)
    min_speedup: float = Field(default=1.01, ge=1.0)
    max_cv: float = Field(default=0.10, ge=0.0)
    benchmark_repetitions: int = Field(default=10, gt=0)
    # A protected case whose speedup's upper confidence bound lies below 1 - this is slower beyond its noise
    # and the candidate is rejected, whatever the aggregate (orchestrator/decision/gates.py); 1.0 turns it off.
    # Calibrated on the recorded runs: docs/results/2026-12-03-case-regression-calibration.md.
    max_case_regression: float = Field(default=0.02, ge=0.0, le=1.0)
    # A kernel that autotunes itself: the trusted step that runs its own autotune once per key for the run
    # (orchestrator/autotune/step.py), compiles included; past it the run stops, naming the configuration it was at.
    max_autotune_seconds: float = Field(default=240.0, gt=0)


# Where a target runs in Triton's CPU interpreter, its timings measure Python executing each program on a
# shared CPU: on an idle 2-core machine one case's per-sample CV was 0.15, and under a parallel load the
# within-worker CV reached 0.48 and the medians of three fresh workers spread 75 %
# (docs/results/2026-12-01-interpreter-stability.md). They say nothing about GPU speed and serve to check
# correctness and the loop, so the CV gate there is set where such scatter passes; the bootstrap test still
# has to find the gain above the measured noise. Judged mode (sandbox_worker/judged/) times each call across
# two processes, so a call also carries the candidate's wake-up: on a loaded 2-core host a 2 ms interpreted
# call reached CVs of 1.06-1.28 at revalidation, hence 2.0. A flag or budget.json still sets any value
# explicitly.
INTERPRETER_BUDGET: dict[str, float] = {"max_cv": 2.0}

BudgetSource = Literal["default", "interpreter default", "target.json", "command line", "budget.json"]


def _read_json(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BundleError(f"{what} file {path} does not exist; pass an existing path") from None
    except IsADirectoryError:
        raise BundleError(f"{what} path {path} is a directory; pass the JSON file itself") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(f"{what} file {path} cannot be read ({exc}); check its permissions and encoding") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleError(
            f"{what} file {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); fix the syntax"
        ) from None


def describe_validation_error(path: Path, exc: ValidationError, *, skip_loc: int = 0, prefix: str = "") -> str:
    """One line naming the first offending field and what is wrong with it."""
    err = exc.errors()[0]
    field = ".".join(str(part) for part in err["loc"][skip_loc:]) or "(top level)"
    where = f"{path}: {prefix}"
    if err["type"] == "extra_forbidden":
        return f"{where}unknown key '{field}'; remove it or check its spelling"
    if err["type"] == "missing":
        return f"{where}required field '{field}' is missing; add it"
    message = err["msg"].removeprefix("Value error, ")
    return f"{where}field '{field}' is invalid: {message}"


def load_cases_file(path: Path) -> list[Case]:
    payload = _read_json(path, "cases")
    if not isinstance(payload, list):
        raise BundleError(f"{path}: cases must be a JSON list of case objects, got {type(payload).__name__}")
    if not payload:
        raise BundleError(f"{path}: the case list is empty; add at least one case")
    try:
        cases = TypeAdapter(list[Case]).validate_python(payload)
    except ValidationError as exc:
        err = exc.errors()[0]
        index = err["loc"][0] if err["loc"] else "?"
        case_id = payload[index].get("case_id") if isinstance(index, int) and isinstance(payload[index], dict) else None
        label = f"case {index}" + (f" ({case_id!r})" if case_id else "")
        raise BundleError(describe_validation_error(path, exc, skip_loc=1, prefix=f"{label}: ")) from None
    seen: set[str] = set()
    for case in cases:
        if case.case_id in seen:
            raise BundleError(f"{path}: case_id {case.case_id!r} appears twice; case ids must be unique")
        seen.add(case.case_id)
    if not any(case.protected for case in cases):
        raise BundleError(f"{path}: no case is protected; mark at least one case \"protected\": true")
    return cases


def load_target_file(path: Path) -> Target:
    payload = _read_json(path, "target")
    if not isinstance(payload, dict):
        raise BundleError(f"{path}: target must be a JSON object, got {type(payload).__name__}")
    try:
        return Target.model_validate(payload)
    except ValidationError as exc:
        raise BundleError(describe_validation_error(path, exc)) from None


def load_budget_file(path: Path) -> dict[str, Any]:
    """Validated overrides only (the keys present in the file), to be merged over the CLI values."""
    payload = _read_json(path, "budget")
    if not isinstance(payload, dict):
        raise BundleError(f"{path}: budget must be a JSON object, got {type(payload).__name__}")
    try:
        Budget.model_validate(payload)
    except ValidationError as exc:
        raise BundleError(describe_validation_error(path, exc)) from None
    return payload
