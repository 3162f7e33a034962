"""The openai provider against a real OpenAI-compatible HTTP server on loopback."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from orchestrator.providers.base import ProposalError, ProviderConfigError
from orchestrator.providers.chat_reply import parse_reply
from orchestrator.providers.openai_provider import OpenAIProvider
from tests.providers.conftest import VECTOR_ADD, context
from tests.providers.loopback import ScriptedServer

METADATA = {
    "hypothesis": "Raising BLOCK_SIZE to 128 halves the programs of case large",
    "evidence": "case large median 4210 us",
    "change": "BLOCK_SIZE 64 -> 128",
    "expected_effect": "lower median on large",
    "risk": "more registers per program",
}
CANDIDATE = VECTOR_ADD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 128")
GOOD_REPLY = f"One change.\n```json\n{json.dumps(METADATA)}\n```\n```python\n{CANDIDATE}```\n"


class FakeOpenAI(ScriptedServer):
    """Scripted POST /v1/chat/completions (see tests/providers/loopback.py)."""

    route = "/v1/chat/completions"
    url_suffix = "/v1"

    def __init__(self, steps: list[tuple[str, Any]]) -> None:
        super().__init__(steps, slow_reply=GOOD_REPLY)

    def ok_body(self, request: dict[str, Any], kind: str, value: Any) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()), "model": request["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": value}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "server_error"}}

    def error_headers(self, status: int) -> dict[str, str]:
        return {"x-should-retry": "true" if status >= 500 else "false"}


@pytest.fixture
def no_openai_env(monkeypatch) -> Iterator[None]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    yield


def propose(provider: OpenAIProvider, **kwargs: Any):
    async def main():
        try:
            return await provider.propose(context(**kwargs))
        finally:
            await provider.aclose()

    return trio.run(main)


def test_success_returns_a_validated_proposal(no_openai_env):
    with FakeOpenAI([("ok", GOOD_REPLY)]) as server:
        proposal = propose(OpenAIProvider("tiny-model", server.url, None, timeout_seconds=5),
                           guidance="Prefer power-of-two blocks.")
    assert proposal.source == CANDIDATE
    assert proposal.metadata.change == "BLOCK_SIZE 64 -> 128"
    (request,) = server.requests
    assert request["model"] == "tiny-model"
    user = request["messages"][-1]["content"]
    assert "median=4210 µs" in user and "Prefer power-of-two blocks." in user and "```python" in user
    assert server.headers[0]["authorization"] == "Bearer EMPTY"  # local server, no key in the environment


def test_concurrent_slots_share_one_client(no_openai_env):
    results = []
    with FakeOpenAI([("ok", GOOD_REPLY)]) as server:
        provider = OpenAIProvider("tiny-model", server.url, "sk-test-key-0123456789", timeout_seconds=5)
        assert provider.concurrent is True

        async def main():
            async with trio.open_nursery() as nursery:
                for slot in range(3):
                    nursery.start_soon(lambda s=slot: _collect(provider, s, results))
            await provider.aclose()

        trio.run(main)
    assert len(results) == 3 and len(server.requests) == 3
    assert server.headers[0]["authorization"] == "Bearer sk-test-key-0123456789"


async def _collect(provider, slot, results):
    results.append(await provider.propose(context(slot_index=slot)))


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("I could not decide.", "0 ```python blocks"),
        (f"```python\n{CANDIDATE}```\n", "0 ```json blocks"),
        (f"```json\n{{not json\n```\n```python\n{CANDIDATE}```\n", "not valid JSON"),
        (GOOD_REPLY.replace("case large median 4210 us", "it should be faster"), "cites no measured evidence"),
        (GOOD_REPLY.replace("def vector_add(", "def renamed("), "drops public top-level definitions"),
        ("", "empty reply"),
    ],
)
def test_malformed_reply_is_a_proposal_error(no_openai_env, reply, message):
    with FakeOpenAI([("ok", reply)]) as server, pytest.raises(ProposalError, match=message):
        propose(OpenAIProvider("tiny-model", server.url, None, timeout_seconds=5))


def test_server_error_is_retried(no_openai_env):
    with FakeOpenAI([("status", 500), ("ok", GOOD_REPLY)]) as server:
        proposal = propose(OpenAIProvider("tiny-model", server.url, None, timeout_seconds=5, max_retries=2))
    assert proposal.source == CANDIDATE and len(server.requests) == 2
    assert server.headers[1].get("x-stainless-retry-count") == "1"


def test_server_error_without_retries_is_reported(no_openai_env):
    with FakeOpenAI([("status", 503)]) as server, pytest.raises(ProposalError, match="HTTP 503: server exploded"):
        propose(OpenAIProvider("tiny-model", server.url, None, timeout_seconds=5, max_retries=0))


def test_slow_server_times_out(no_openai_env):
    started = time.monotonic()
    with FakeOpenAI([("sleep", 30.0)]) as server, pytest.raises(ProposalError, match="timed out"):
        propose(OpenAIProvider("tiny-model", server.url, None, timeout_seconds=0.5, max_retries=0))
    assert time.monotonic() - started < 10


def test_candidate_deadline_bounds_the_request(no_openai_env):
    with FakeOpenAI([("sleep", 30.0)]) as server, pytest.raises(ProposalError, match="candidate deadline"):
        propose(OpenAIProvider("tiny-model", server.url, None, timeout_seconds=20, max_retries=0),
                deadline_seconds=0.5)


def test_unreachable_endpoint_is_a_proposal_error(no_openai_env):
    with FakeOpenAI([("ok", GOOD_REPLY)]) as server:
        url = server.url
    with pytest.raises(ProposalError, match="cannot reach"):
        propose(OpenAIProvider("tiny-model", url, None, timeout_seconds=2, max_retries=0))


def test_configuration_errors(no_openai_env, monkeypatch):
    with pytest.raises(ProviderConfigError, match="--model"):
        OpenAIProvider(None, "http://127.0.0.1:1/v1", None, timeout_seconds=5)
    with pytest.raises(ProviderConfigError, match="OPENAI_API_KEY"):
        OpenAIProvider("tiny-model", None, None, timeout_seconds=5)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    provider = OpenAIProvider("tiny-model", None, None, timeout_seconds=5)
    assert provider.base_url == "http://127.0.0.1:9/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-000000000")
    assert OpenAIProvider("tiny-model", None, None, timeout_seconds=5).base_url is None


def test_parse_reply_requires_exactly_one_of_each_block():
    source, metadata = parse_reply(GOOD_REPLY)
    assert source == CANDIDATE and metadata == METADATA
    with pytest.raises(ProposalError, match="2 ```python blocks"):
        parse_reply(GOOD_REPLY + "```python\nx = 1\n```\n")
