"""Candidates from any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp, Ollama).

Chat completions are the lowest common denominator of local servers, so the reply format is plain text:
one fenced ```json block with the metadata and one fenced ```python block with the complete source. The
reply is parsed by chat_reply.py (shared with the anthropic provider) and validated by the shared
contract; any problem becomes a `ProposalError`, never a crash.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import openai

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


def resolve_endpoint(
    base_url: str | None, api_key: str | None, environ: Mapping[str, str]
) -> tuple[str | None, str]:
    """(base_url, api_key): arguments first, then OPENAI_BASE_URL / OPENAI_API_KEY.

    A local server needs no key, but the SDK refuses to start without one, so "EMPTY" stands in when a base
    URL is known. With neither a key nor a base URL there is nowhere sensible to send the request.
    """
    url = base_url or environ.get("OPENAI_BASE_URL") or None
    key = api_key or environ.get("OPENAI_API_KEY") or None
    if key is None:
        if url is None:
            raise ProviderConfigError(
                "the openai provider needs OPENAI_API_KEY, or a base URL (OPENAI_BASE_URL) of a local server"
            )
        key = "EMPTY"
    return url, key


class OpenAIProvider:
    """One chat-completions request per candidate slot; slots of a round run concurrently."""

    name = "openai"
    concurrent = True

    def __init__(
        self,
        model: str | None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_seconds: float = 600.0,
        max_retries: int = 2,
        *,
        max_prompt_chars: int = 48_000,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if not model or not model.strip():
            raise ProviderConfigError("the openai provider needs --model; no model name is ever assumed")
        if timeout_seconds <= 0:
            raise ProviderConfigError(f"timeout_seconds must be > 0, got {timeout_seconds}")
        if max_retries < 0:
            raise ProviderConfigError(f"max_retries must be >= 0, got {max_retries}")
        self.model = model.strip()
        self.base_url, self._api_key = resolve_endpoint(base_url, api_key, os.environ if environ is None else environ)
        self.timeout_seconds = float(timeout_seconds)
        self.max_retries = max_retries
        self.max_prompt_chars = max_prompt_chars
        self._client: openai.AsyncOpenAI | None = None

    def _get_client(self) -> openai.AsyncOpenAI:
        # Created lazily so the HTTP client is born inside the trio run that uses it.
        if self._client is None:
            options: dict[str, Any] = {}
            if self.base_url is not None:
                options["base_url"] = self.base_url
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key, timeout=self.timeout_seconds, max_retries=self.max_retries, **options
            )
        return self._client

    def build_messages(self, context: ProposalContext) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": SYSTEM_MESSAGE},
            {"role": "user", "content": user_message(context, self.max_prompt_chars)},
        ]

    async def _complete(self, messages: list[dict[str, str]], timeout: float) -> str | None:
        try:
            response = await self._get_client().chat.completions.create(
                model=self.model, messages=messages, timeout=timeout  # type: ignore[arg-type]
            )
        except openai.APITimeoutError:
            raise ProposalError(f"the openai request timed out after {timeout:g} s") from None
        except openai.APIConnectionError as exc:
            raise ProposalError(f"cannot reach the openai endpoint {self.base_url or 'default'}: {exc}") from None
        except openai.APIStatusError as exc:
            detail = error_detail(exc.body, exc.message)
            raise ProposalError(f"the openai endpoint answered HTTP {exc.status_code}: {detail}") from None
        except openai.OpenAIError as exc:
            raise ProposalError(f"the openai request failed: {redact_secrets(one_line(exc, 300))}") from None
        if not response.choices:
            raise ProposalError("the openai reply has no choices")
        choice = response.choices[0]
        if choice.finish_reason == "length":
            raise ProposalError("the openai reply was cut off (finish_reason=length); the file is incomplete")
        return choice.message.content

    async def propose(self, context: ProposalContext) -> Proposal:
        """Ask once, within the candidate deadline (retries included), and validate the reply."""
        deadline = request_deadline(self.timeout_seconds, self.max_retries, context)
        messages = self.build_messages(context)
        return await propose_from_reply(
            context, label="openai", deadline=deadline,
            ask=lambda: self._complete(messages, min(self.timeout_seconds, deadline)),
        )

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
