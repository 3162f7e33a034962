"""Clipping text for log lines, reasons and prompts: one rule, so every clipped string reads the same.

A clipped string ends in `…` (one character), so `limit` is the exact upper bound on its length.
sandbox_worker/ keeps its own `clip` (sandbox_worker/failures.py): the worker imports the standard library only, never orchestrator/.
"""

from __future__ import annotations

ELLIPSIS = "…"


def one_line(text: object, limit: int) -> str:
    """`str(text)` with whitespace runs collapsed to one space and NUL stripped, at most `limit` characters.

    Safe to embed in a list item or a `key=value` log line: it has no newline.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1 (room for at least the ellipsis), got {limit}")
    collapsed = " ".join(str(text).replace("\x00", "").split())
    if len(collapsed) <= limit:
        return collapsed
    return collapsed[: limit - 1].rstrip() + ELLIPSIS


def tail_lines(text: str, count: int) -> list[str]:
    """The last `count` non-blank lines of `text`, stripped, NUL removed: what explains a failure on stderr."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")  # [-0:] would silently keep every line
    lines = [line.strip() for line in text.replace("\x00", "").splitlines()]
    return [line for line in lines if line][-count:]


def cap_block(text: str, limit: int, what: str) -> str:
    """A multi-line excerpt of at most `limit` characters of `text`, then a line saying how much of `what`
    was left out (NUL stripped); line breaks are kept."""
    text = text.replace("\x00", "")
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n{ELLIPSIS} ({len(text) - limit} more characters of {what} omitted)"
