"""The plain-text reply contract of chat-model providers (openai, anthropic).

A chat model gets the system message and one user message (the measured evidence plus `REPLY_FORMAT`)
and must answer with one fenced ```json block of metadata and one fenced ```python block holding the
complete source. Parsing and the deadline live here so every chat provider fails the same way: any
problem becomes a `ProposalError`, never a crash.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from orchestrator.providers.base import Proposal, ProposalContext, ProposalError
from orchestrator.providers.contract import (
    METADATA_KEYS,
    fenced_blocks,
    metadata_from_json_text,
    validate_proposal,
)
from orchestrator.providers.prompt import build_prompt, evidence_terms
from orchestrator.providers.redaction import redact_secrets
from orchestrator.text import one_line

SYSTEM_MESSAGE = (
    "You are a GPU kernel performance engineer. You propose exactly one measured, testable change to a "
    "Triton/TLX kernel file and return the complete new file. You never special-case benchmarks."
)

REPLY_FORMAT = f"""\
## Reply format
Reply with exactly two fenced blocks and nothing else of substance:
1. One ```json block holding an object with the string keys {", ".join(METADATA_KEYS)}. Each value is a single
   line of at most 240 characters; `evidence` quotes measured numbers, case ids or metrics from above.
2. One ```python block holding the complete replacement kernel file (not a diff, not an excerpt).
"""
_PROMPT_RESERVE = len(REPLY_FORMAT) + 64
PYTHON_LANGUAGES = frozenset({"python", "py", "python3"})


def parse_reply(text: str | None) -> tuple[str, dict[str, Any]]:
    """(source, metadata) from a reply with exactly one ```json and one ```python block."""
    if not text or not text.strip():
        raise ProposalError("the model returned an empty reply")
    blocks = fenced_blocks(text)
    json_blocks = [body for language, body in blocks if language == "json"]
    python_blocks = [body for language, body in blocks if language in PYTHON_LANGUAGES]
    if len(python_blocks) != 1:
        raise ProposalError(f"the reply has {len(python_blocks)} ```python blocks; exactly one is required")
    if len(json_blocks) != 1:
        raise ProposalError(f"the reply has {len(json_blocks)} ```json blocks; exactly one is required")
    return python_blocks[0], metadata_from_json_text(json_blocks[0])


def user_message(context: ProposalContext, max_prompt_chars: int) -> str:
    """The evidence prompt (with the incumbent source) followed by the reply format, within the budget."""
    prompt = build_prompt(context, max_chars=max(max_prompt_chars - _PROMPT_RESERVE, 1000))
    return f"{prompt}\n{REPLY_FORMAT}"


def error_detail(body: object, fallback: object) -> str:
    """The one-line, redacted message of an HTTP error body.

    OpenAI's SDK keeps the inner `{"message": ...}` object as the body; Anthropic's keeps the whole
    `{"type": "error", "error": {"message": ...}}` envelope. Anything else falls back to the SDK's message.
    """
    message: object = None
    if isinstance(body, dict):
        inner = body.get("error")
        message = inner.get("message") if isinstance(inner, dict) else body.get("message")
    return redact_secrets(one_line(message if isinstance(message, str) else fallback, 300))


def request_deadline(timeout_seconds: float, max_retries: int, context: ProposalContext) -> float:
    """Every attempt, the back-off between them and a margin, but never past the candidate deadline."""
    return max(min(timeout_seconds * (max_retries + 1) + 5.0, context.deadline_seconds), 0.001)


async def propose_from_reply(
    context: ProposalContext,
    *,
    label: str,
    deadline: float,
    ask: Callable[[], Awaitable[str | None]],
) -> Proposal:
    """Ask once within `deadline` (the SDK's own retries included) and validate the reply.

    The SDK honours `retry-after` without an upper bound, so this trio deadline is what bounds a
    rate-limited request.
    """
    with trio.move_on_after(deadline) as scope:
        text = await ask()
    if scope.cancelled_caught:
        raise ProposalError(f"the {label} request timed out: no reply within the {deadline:g} s candidate deadline")
    source, metadata = parse_reply(text)
    return validate_proposal(source, metadata, context.incumbent_source, evidence_terms=evidence_terms(context))
