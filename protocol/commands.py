"""What the smaller subcommands print on stdout when they succeed (each prints exactly one JSON document)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from protocol.base import StrictModel
from protocol.outcome import ExitCode


class InitBundleOutput(StrictModel):
    """`tlx-agent init-bundle`: the starter files written and the command that validates them."""

    success: Literal[True]
    exit_code: ExitCode
    bundle_dir: str
    files: dict[str, str]  # harness / cases / target -> absolute path
    entry: str
    kind: str
    kind_source: Literal["--kind", "inferred"]
    backend: str
    dtype: str
    inputs: list[str]  # what the harness passes, in the entry's order (tensors and scalars)
    outputs: list[str]
    shapes: dict[str, list[str]]  # tensor input or output -> its shape in the case's dimensions
    scalars: dict[str, str]  # scalar input -> "float" / "int" / "bool" (drawn), "dim:D", "shape:D" or "none"
    reference: str  # "kernel" (the untouched kernel), "todo" (verify fails until written), or the standard math's name
    guesses: list[str]  # each inference init-bundle made, with its evidence and how to check it
    main_scope: str | None
    validate_command: list[str]  # argv of the validate command, ready to run


class ToolCheck(StrictModel):
    """One tool `doctor` looked for: what it found (`detail`), and what to do when it is not ok (`fix`)."""

    name: str  # torch, triton, tlx, proton, cuda_device, ncu, codex, claude
    status: Literal["ok", "missing", "warning"]  # missing: a run that needs it cannot start; warning: degraded
    detail: str
    fix: str | None = None
    facts: dict[str, Any] = Field(default_factory=dict)  # versions, paths, device, as found


class DoctorOutput(StrictModel):
    """`tlx-agent doctor`: each isolation layer as active, degraded:<reason> or unavailable:<reason>, and each
    tool a run may need (orchestrator/worker/toolchain.py)."""

    isolation_mode: Literal["strict", "standard", "off"]
    layers: dict[str, str]
    strict_ok: bool
    worker_python: str | None = None
    tools: list[ToolCheck] = Field(default_factory=list)


class SkillInstallOutput(StrictModel):
    """`tlx-agent skill install`: where the agent skill went."""

    success: Literal[True]
    exit_code: ExitCode
    skill: str
    status: Literal["installed", "unchanged", "replaced"]
    agent: Literal["claude", "codex"] | None
    source: str
    destination: str
    skill_md: str
    files: list[str]
    replaced_differences: list[str]
