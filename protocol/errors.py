"""The error document: what any subcommand prints on stdout (its one JSON document) when it fails.

`orchestrator/cli/output.py: fail` builds and validates it; stderr gets the same message as one line.
"""

from __future__ import annotations

from typing import Literal

from protocol.base import StrictModel
from protocol.outcome import ExitCode, StoppingReason


class ErrorDocument(StrictModel):
    success: Literal[False]
    exit_code: ExitCode
    error: str  # one line naming what failed and what to do
    # Present only when the failure came after the output directory was created (it holds partial artifacts).
    output_dir: str | None = None
    # Present only when a run was stopped (null: stopped for a reason outside StoppingReason).
    stopping_reason: StoppingReason | None = None
