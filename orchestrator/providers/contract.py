"""The one candidate contract every generator's output must meet before it reaches a worker.

A provider may be an LLM, a Codex agent or a tuner; whatever it returns is checked here the same way,
so a malformed reply becomes a `failed` experiment with a reason instead of a wasted evaluation.

Rules (each failure raises `ProposalError` naming the rule):
- metadata has the keys `hypothesis, evidence, change, expected_effect, risk`; each value is a string that is a
  single line, non-empty after stripping, at most 240 characters; other keys are ignored;
- `evidence` cites measured evidence: it contains a number (a measured value such as `812.3`) or one of the
  caller's `evidence_terms` (case ids or metric names from the context). Anything else is an opinion;
- the source parses (`ast.parse`), keeps every public (no leading underscore) top-level def/class of the
  incumbent, and is not a stub: its significant code (comments, blank lines and trailing whitespace removed)
  is at least half as long as the incumbent's.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Collection, Mapping
from typing import Any

from orchestrator.providers.base import Proposal, ProposalError
from protocol.results import CandidateMetadata

METADATA_KEYS: tuple[str, ...] = ("hypothesis", "evidence", "change", "expected_effect", "risk")
MAX_METADATA_CHARS = 240
MIN_SIGNIFICANT_FRACTION = 0.5
_DIGIT = re.compile(r"\d")


def normalize_source(source: str) -> str:
    """The source without comments, blank lines and trailing whitespace: what the code *is*.

    Comments are found with `tokenize` (a `#` inside a string is not a comment). A source that does not
    tokenize falls back to dropping whole-line `#` comments only.
    """
    text = source.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        lines = [line for line in lines if not line.lstrip().startswith("#")]
    else:
        # Cut comments right to left so earlier columns on the same line stay valid.
        for token in reversed(tokens):
            if token.type == tokenize.COMMENT:
                row, col = token.start
                lines[row - 1] = lines[row - 1][:col]
    kept = [line.rstrip() for line in lines if line.strip()]
    return "\n".join(kept) + "\n"


def public_top_level_names(tree: ast.Module) -> set[str]:
    """Names of top-level functions and classes a caller may import (no leading underscore)."""
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_")
    }


def _single_line(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ProposalError(f"metadata field '{key}' must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise ProposalError(f"metadata field '{key}' is empty; every field needs one concrete line")
    if "\n" in text or "\r" in text:
        raise ProposalError(f"metadata field '{key}' spans several lines; it must be a single line")
    if len(text) > MAX_METADATA_CHARS:
        raise ProposalError(
            f"metadata field '{key}' has {len(text)} characters; the limit is {MAX_METADATA_CHARS}"
        )
    return text


def cites_measured_evidence(evidence: str, evidence_terms: Collection[str] = ()) -> bool:
    """True when the text holds a number or names a case/metric from the context (case-insensitive)."""
    if _DIGIT.search(evidence):
        return True
    lowered = evidence.lower()
    return any(term and term.lower() in lowered for term in evidence_terms)


def validate_metadata(
    metadata: Mapping[str, Any] | CandidateMetadata, *, evidence_terms: Collection[str] = ()
) -> CandidateMetadata:
    """Check the five one-line fields and return them as the protocol model."""
    if isinstance(metadata, CandidateMetadata):
        fields: Mapping[str, Any] = metadata.model_dump()
    elif isinstance(metadata, Mapping):
        fields = metadata
    else:
        raise ProposalError(f"candidate metadata must be a JSON object, got {type(metadata).__name__}")
    missing = [key for key in METADATA_KEYS if key not in fields]
    if missing:
        raise ProposalError(f"candidate metadata lacks {', '.join(missing)}; all of {', '.join(METADATA_KEYS)} are required")
    values = {key: _single_line(key, fields[key]) for key in METADATA_KEYS}
    if not cites_measured_evidence(values["evidence"], evidence_terms):
        raise ProposalError(
            "metadata field 'evidence' cites no measured evidence; quote a measured number or name a case or metric"
        )
    return CandidateMetadata(**values)


def validate_source(source: str, incumbent_source: str) -> None:
    """Reject sources that do not parse, drop a public entry point, or are a stub of the incumbent."""
    if not isinstance(source, str) or not source.strip():
        raise ProposalError("candidate source is empty")
    if "\x00" in source:
        raise ProposalError("candidate source contains a NUL byte")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ProposalError(f"candidate source does not parse: {exc.msg} (line {exc.lineno})") from None
    try:
        incumbent_tree = ast.parse(incumbent_source)
    except SyntaxError:
        incumbent_names: set[str] = set()
    else:
        incumbent_names = public_top_level_names(incumbent_tree)
    lost = sorted(incumbent_names - public_top_level_names(tree))
    if lost:
        raise ProposalError(f"candidate source drops public top-level definitions: {', '.join(lost)}")
    incumbent_size = len(normalize_source(incumbent_source))
    candidate_size = len(normalize_source(source))
    if candidate_size < MIN_SIGNIFICANT_FRACTION * incumbent_size:
        raise ProposalError(
            f"candidate source is a stub: {candidate_size} significant characters against the incumbent's "
            f"{incumbent_size} (minimum {MIN_SIGNIFICANT_FRACTION:.0%})"
        )


def validate_proposal(
    source: str,
    metadata: Mapping[str, Any] | CandidateMetadata,
    incumbent_source: str,
    *,
    evidence_terms: Collection[str] = (),
) -> Proposal:
    """The single gate between a generator and the run loop; raises `ProposalError` with the reason."""
    checked = validate_metadata(metadata, evidence_terms=evidence_terms)
    validate_source(source, incumbent_source)
    return Proposal(source=source, metadata=checked)


_FENCE_OPEN = re.compile(r"^\s*```\s*([A-Za-z0-9_+.-]*)\s*$")
_FENCE_CLOSE = re.compile(r"^\s*```\s*$")


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, read line by line; an unclosed block is ignored."""
    blocks: list[tuple[str, str]] = []
    language: str | None = None
    body: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if language is None:
            opened = _FENCE_OPEN.match(line)
            if opened:
                language, body = opened.group(1).lower(), []
        elif _FENCE_CLOSE.match(line):
            blocks.append((language, "\n".join(body) + "\n"))
            language = None
        else:
            body.append(line)
    return blocks


def metadata_from_json_text(text: str) -> dict[str, Any]:
    """Parse a metadata JSON object, or raise `ProposalError` saying what is wrong with it."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProposalError(f"candidate metadata is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(value, dict):
        raise ProposalError(f"candidate metadata must be a JSON object, got {type(value).__name__}")
    return value


def metadata_json_schema() -> dict[str, Any]:
    """JSON Schema of the metadata object, given to generators that can follow one (Codex)."""
    field = {"type": "string", "minLength": 1, "maxLength": MAX_METADATA_CHARS, "pattern": "^[^\\n\\r]+$"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "candidate_metadata",
        "type": "object",
        "properties": {key: dict(field) for key in METADATA_KEYS},
        "required": list(METADATA_KEYS),
        "additionalProperties": False,
    }
