"""The structured profile request sent to `harness.profile(artifact, case, request)`, and the
profile documents a run writes from the replies (the replies themselves are the harness's, kept as given).
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from protocol.base import StrictModel
from protocol.results import EvaluationStatus

ProfileTool = Literal["proton_launch", "native_profiler", "ncu", "proton_intra_kernel"]


class ProfileRequest(StrictModel):
    level: Literal["summary", "deep"] = "summary"
    tools: list[ProfileTool] = Field(default_factory=lambda: ["proton_launch", "native_profiler"])
    experiment_id: str = Field(min_length=1, max_length=120)
    artifacts_dir: str
    reason: str = Field(default="candidate", max_length=240)
    diagnostic_only: bool = False
    # Only meaningful for proton_intra_kernel; the runtime rejects warp_group today.
    granularity: Literal["warp"] | None = None

    @field_validator("artifacts_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not PurePath(value).is_absolute():
            raise ValueError("artifacts_dir must be an absolute path")
        return value

    @model_validator(mode="after")
    def _instrumentation_is_diagnostic(self) -> ProfileRequest:
        if "proton_intra_kernel" in self.tools and not self.diagnostic_only:
            raise ValueError("proton_intra_kernel requests must be diagnostic_only")
        if self.granularity is not None and "proton_intra_kernel" not in self.tools:
            raise ValueError("granularity applies only to proton_intra_kernel")
        return self


NATIVE_PROFILERS: dict[str, str | None] = {"cuda": "ncu", "nvidia": "ncu"}


def resolve_native_profiler(request: ProfileRequest, backend: str) -> tuple[ProfileRequest, list[str]]:
    """Replace the portable `native_profiler` tool by the backend's tool (cuda/nvidia -> ncu).

    Backends without a known native profiler drop the tool and get a diagnostic, never an invented one.
    """
    diagnostics: list[str] = []
    native = NATIVE_PROFILERS.get(backend.strip().lower())
    tools: list[str] = []
    for tool in request.tools:
        if tool == "native_profiler":
            if native is None:
                diagnostics.append(f"no native profiler is known for backend {backend!r}; native_profiler skipped")
                continue
            tool = native
        if tool not in tools:
            tools.append(tool)
    return request.model_copy(update={"tools": tools}), diagnostics


# ---- documents (written by orchestrator/run/loop.py and orchestrator/run/profile_step.py) -----------------

# baseline_profile.json, best_profile.json: case id -> the harness's profile reply (null: that case has none).
ProfilesByCase = dict[str, dict[str, Any] | None]


class ProfileDelta(StrictModel):
    """One profile figure of a candidate against the incumbent (null: missing on either side)."""

    candidate: float | None
    incumbent: float | None
    delta: float | None  # candidate - incumbent
    relative: float | None  # delta / incumbent (null when the incumbent is 0)


class CaseProfileComparison(StrictModel):
    """One case of experiments/<id>/profile.json."""

    profile: dict[str, Any] | None  # the candidate's profile reply (deep one when taken)
    deltas: dict[str, ProfileDelta]  # "ncu.duration_us", "proton.main_kernel_us", ... -> delta
    # Why the NCU regression veto could not be checked for this case; the key is absent when it was.
    veto_diagnostic: str | None = Field(default=None, exclude_if=lambda value: value is None)


# experiments/<id>/profile.json: case id -> the candidate's profile and its deltas against the incumbent.
ExperimentProfiles = dict[str, CaseProfileComparison]


class DiagnosticProfile(StrictModel):
    """experiments/<id>/diagnostic_profile.json: intra-kernel traces, never benchmarked or decided on."""

    diagnostic_only: Literal[True]
    status: EvaluationStatus
    reason: str
    profiles: ProfilesByCase
