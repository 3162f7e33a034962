"""What a subcommand prints: exactly one JSON document on stdout, and a one-line error on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from protocol.errors import ErrorDocument
from protocol.outcome import ExitCode


def emit(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n")
    sys.stdout.flush()


def fail(message: str, exit_code: int = ExitCode.ERROR, **extra: Any) -> int:
    """Report a failure the user can act on: one stderr line, the error document on stdout; returns the code.

    `extra` holds the optional fields of `ErrorDocument` (a key it does not know raises ValidationError: a
    caller's mistake); only the fields given are printed, so a failure before any output exists names none.
    """
    document = ErrorDocument.model_validate({"success": False, "exit_code": int(exit_code), "error": message, **extra})
    sys.stderr.write(f"[tlx-agent] error: {message}\n")
    emit(document.model_dump(mode="json", exclude_unset=True))
    return int(exit_code)
