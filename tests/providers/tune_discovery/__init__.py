"""Knob discovery and lossless edits on kernels written in the usual Triton styles (kernels/)."""

from __future__ import annotations

import difflib
from pathlib import Path

KERNELS = Path(__file__).resolve().parent / "kernels"


def kernel(name: str) -> str:
    return (KERNELS / f"{name}.py").read_text(encoding="utf-8")


def changed_lines(before: str, after: str) -> list[str]:
    """The diff's removed and added lines, without context."""
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def drop_lines(source: str, *starts: str) -> str:
    """`source` without the lines that begin (after indentation) with any of `starts`."""
    return "".join(line for line in source.splitlines(keepends=True) if not line.strip().startswith(starts))
