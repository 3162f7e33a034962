"""Candidates from Anthropic's Messages API through the official `anthropic` SDK.

One `client.messages.create(model=..., max_tokens=..., system=..., messages=[user])` per candidate slot,
with the same plain-text reply contract as the openai provider (chat_reply.py): one ```json metadata
block and one ```python block holding the complete file. The model is whatever `--model` names, never
assumed. The key is `api_key` or ANTHROPIC_API_KEY and the endpoint `base_url` or ANTHROPIC_BASE_URL,
both resolved here and handed to the SDK explicitly, so the SDK never goes looking for other credentials.
The SDK retries 408/409/429/5xx `max_retries` times, honouring `retry-after`; the candidate deadline
(chat_reply.request_deadline) bounds all of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import anthropic

from orchestrator.providers.base import Proposal, ProposalContext, ProposalError, ProviderConfigError
from orchestrator.providers.chat_reply import (
    SYSTEM_MESSAGE,
    error_detail,
    propose_from_reply,
    request_deadline,
    user_message,
)
from orchestrator.providers.redaction import redact_secrets
from orchestrator.text import one_line

# Room for a complete kernel file plus the metadata; current Claude models accept at least this many
# output tokens. A reply cut off at the limit is refused (stop_reason "max_tokens"), never half-used.
DEFAULT_MAX_TOKENS = 16_384


def resolve_credentials(
    base_url: str | None, api_key: str | None, environ: Mapping[str, str]
) -> tuple[str | None, str]:
    """(base_url, api_key): arguments first, then ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY."""
    key = api_key or environ.get("ANTHROPIC_API_KEY") or None
    if key is None:
        raise ProviderConfigError(
            "the anthropic provider needs ANTHROPIC_API_KEY (an Anthropic API key); "
            "set it, or use --provider claude for a Claude Code login"
        )
    return base_url or environ.get("ANTHROPIC_BASE_URL") or None, key


class AnthropicProvider:
    """One Messages API request per candidate slot; slots of a round run concurrently."""

    name = "anthropic"
    concurrent = True

    def __init__(
        self,
        model: str | None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_seconds: float = 600.0,
        max_retries: int = 2,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_prompt_chars: int = 48_000,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if not model or not model.strip():
            raise ProviderConfigError("the anthropic provider needs --model; no model name is ever assumed")
        if timeout_seconds <= 0:
            raise ProviderConfigError(f"timeout_seconds must be > 0, got {timeout_seconds}")
        if max_retries < 0:
            raise ProviderConfigError(f"max_retries must be >= 0, got {max_retries}")
        if max_tokens <= 0:
            raise ProviderConfigError(f"max_tokens must be > 0, got {max_tokens}")
        self.model = model.strip()
        self.base_url, self._api_key = resolve_credentials(
            base_url, api_key, os.environ if environ is None else environ
        )
        self.timeout_seconds = float(timeout_seconds)
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.max_prompt_chars = max_prompt_chars
        self._client: anthropic.AsyncAnthropic | None = None

    def _get_client(self) -> anthropic.AsyncAnthropic:
        # Created lazily so the HTTP client is born inside the trio run that uses it.
        if self._client is None:
            options: dict[str, Any] = {}
            if self.base_url is not None:
                options["base_url"] = self.base_url
            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key, timeout=self.timeout_seconds, max_retries=self.max_retries, **options
            )
        return self._client

    async def _complete(self, prompt: str, timeout: float) -> str:
        try:
            response = await self._get_client().messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=SYSTEM_MESSAGE,
                messages=[{"role": "user", "content": prompt}],
                timeout=timeout,
            )
        # APITimeoutError is a kind of APIConnectionError: it must be caught first.
        except anthropic.APITimeoutError:
            raise ProposalError(f"the anthropic request timed out after {timeout:g} s") from None
        except anthropic.APIConnectionError as exc:
            raise ProposalError(f"cannot reach the anthropic endpoint {self.base_url or 'default'}: {exc}") from None
        except anthropic.APIStatusError as exc:
            detail = error_detail(exc.body, exc.message)
            raise ProposalError(f"the anthropic endpoint answered HTTP {exc.status_code}: {detail}") from None
        except anthropic.AnthropicError as exc:
            raise ProposalError(f"the anthropic request failed: {redact_secrets(one_line(exc, 300))}") from None
        if response.stop_reason == "max_tokens":
            raise ProposalError(
                f"the anthropic reply was cut off at max_tokens={self.max_tokens}; the file is incomplete"
            )
        if response.stop_reason == "refusal":
            raise ProposalError("the anthropic model refused to answer (stop_reason=refusal)")
        return "".join(block.text for block in response.content if block.type == "text")

    async def propose(self, context: ProposalContext) -> Proposal:
        """Ask once, within the candidate deadline (retries included), and validate the reply."""
        deadline = request_deadline(self.timeout_seconds, self.max_retries, context)
        prompt = user_message(context, self.max_prompt_chars)
        return await propose_from_reply(
            context, label="anthropic", deadline=deadline,
            ask=lambda: self._complete(prompt, min(self.timeout_seconds, deadline)),
        )

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
