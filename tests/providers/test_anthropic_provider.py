"""The anthropic provider against a real Messages API server on loopback, through the official SDK."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import trio

from orchestrator.providers.anthropic_provider import AnthropicProvider
from orchestrator.providers.base import ProposalError, ProviderConfigError
from orchestrator.providers.chat_reply import SYSTEM_MESSAGE
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
KEY = "sk-ant-test-0123456789abcdef"
FAST_RETRY = {"retry-after-ms": "10"}  # the SDK obeys it, so retry tests do not sleep through its back-off


class FakeAnthropic(ScriptedServer):
    """Scripted POST /v1/messages; `("stop", reason)` answers GOOD_REPLY with that stop_reason."""

    route = "/v1/messages"

    def __init__(self, steps: list[tuple[str, Any]]) -> None:
        super().__init__(steps, slow_reply=GOOD_REPLY)

    def ok_body(self, request: dict[str, Any], kind: str, value: Any) -> dict[str, Any]:
        text, stop_reason = (GOOD_REPLY, value) if kind == "stop" else (value, "end_turn")
        return {
            "id": "msg_01", "type": "message", "role": "assistant", "model": request["model"],
            "content": [{"type": "text", "text": text}], "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = {429: "rate_limit_error", 404: "not_found_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}


def provider(server: FakeAnthropic, **kwargs: Any) -> AnthropicProvider:
    kwargs.setdefault("timeout_seconds", 5)
    return AnthropicProvider("claude-test-model", server.url, environ={"ANTHROPIC_API_KEY": KEY}, **kwargs)


def propose(chosen: AnthropicProvider, **kwargs: Any):
    async def main():
        try:
            return await chosen.propose(context(**kwargs))
        finally:
            await chosen.aclose()

    return trio.run(main)


def test_success_sends_the_messages_api_request_and_returns_a_validated_proposal():
    with FakeAnthropic([("ok", GOOD_REPLY)]) as server:
        proposal = propose(provider(server, max_tokens=12_000), guidance="Prefer power-of-two blocks.")
    assert proposal.source == CANDIDATE
    assert proposal.metadata.change == "BLOCK_SIZE 64 -> 128"
    (request,) = server.requests
    assert request["model"] == "claude-test-model" and request["max_tokens"] == 12_000
    assert request["system"] == SYSTEM_MESSAGE
    (message,) = request["messages"]
    assert message["role"] == "user"
    assert "median=4210 µs" in message["content"] and "Prefer power-of-two blocks." in message["content"]
    assert "```python" in message["content"]
    headers = server.headers[0]
    # Older SDKs send the key as X-Api-Key, 2.x as a bearer token; either way it is this key.
    assert KEY in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    assert "anthropic-version" in headers


def test_concurrent_slots_share_one_client():
    results = []
    with FakeAnthropic([("ok", GOOD_REPLY)]) as server:
        chosen = provider(server)
        assert chosen.concurrent is True

        async def one(slot):
            results.append(await chosen.propose(context(slot_index=slot)))

        async def main():
            async with trio.open_nursery() as nursery:
                for slot in range(3):
                    nursery.start_soon(one, slot)
            await chosen.aclose()

        trio.run(main)
    assert len(results) == 3 and len(server.requests) == 3


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (("ok", "I could not decide."), "0 ```python blocks"),
        (("ok", f"```python\n{CANDIDATE}```\n"), "0 ```json blocks"),
        (("ok", f"```json\n{{not json\n```\n```python\n{CANDIDATE}```\n"), "not valid JSON"),
        (("ok", GOOD_REPLY.replace("case large median 4210 us", "it should be faster")), "cites no measured evidence"),
        (("ok", GOOD_REPLY.replace("def vector_add(", "def renamed(")), "drops public top-level definitions"),
        (("ok", ""), "empty reply"),
        (("stop", "max_tokens"), "cut off at max_tokens=16384"),
        (("stop", "refusal"), "refused"),
    ],
)
def test_malformed_reply_is_a_proposal_error(step, message):
    with FakeAnthropic([step]) as server, pytest.raises(ProposalError, match=message):
        propose(provider(server))
    assert len(server.requests) == 1  # a bad reply is not retried


def test_server_error_is_retried_then_succeeds():
    with FakeAnthropic([("status", (500, FAST_RETRY)), ("ok", GOOD_REPLY)]) as server:
        proposal = propose(provider(server, max_retries=2))
    assert proposal.source == CANDIDATE and len(server.requests) == 2
    assert server.headers[1].get("x-stainless-retry-count") == "1"


@pytest.mark.parametrize("status", [429, 500])
def test_persistent_errors_stop_after_the_bounded_retries(status):
    with FakeAnthropic([("status", (status, FAST_RETRY))]) as server, pytest.raises(ProposalError) as caught:
        propose(provider(server, max_retries=2))
    assert len(server.requests) == 3  # the first attempt and max_retries=2 more, never another
    assert str(caught.value) == f"the anthropic endpoint answered HTTP {status}: server exploded"


def test_a_long_retry_after_is_bounded_by_the_candidate_deadline():
    started = time.monotonic()
    script = [("status", (429, {"retry-after": "3600"}))]
    with FakeAnthropic(script) as server, pytest.raises(ProposalError, match="within the 1 s candidate deadline"):
        propose(provider(server, max_retries=2), deadline_seconds=1.0)
    assert time.monotonic() - started < 10
    assert len(server.requests) == 1


def test_slow_server_times_out():
    started = time.monotonic()
    with FakeAnthropic([("sleep", 30.0)]) as server, pytest.raises(ProposalError, match="timed out after 0.5 s"):
        propose(provider(server, timeout_seconds=0.5, max_retries=0))
    assert time.monotonic() - started < 10


def test_unreachable_endpoint_is_a_proposal_error():
    with FakeAnthropic([("ok", GOOD_REPLY)]) as server:
        closed = provider(server, timeout_seconds=2, max_retries=0)
    with pytest.raises(ProposalError, match="cannot reach the anthropic endpoint http://127.0.0.1"):
        propose(closed)


def test_missing_api_key_is_one_clear_configuration_line():
    with pytest.raises(ProviderConfigError) as caught:
        AnthropicProvider("claude-test-model", "http://127.0.0.1:9", environ={"OPENAI_API_KEY": "sk-other-000000"})
    assert str(caught.value) == (
        "the anthropic provider needs ANTHROPIC_API_KEY (an Anthropic API key); "
        "set it, or use --provider claude for a Claude Code login"
    )


def test_model_is_required_and_never_assumed():
    for model in (None, "", "  "):
        with pytest.raises(ProviderConfigError, match="needs --model; no model name is ever assumed"):
            AnthropicProvider(model, environ={"ANTHROPIC_API_KEY": KEY})


def test_endpoint_and_key_come_from_arguments_first_then_the_environment():
    environ = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    assert AnthropicProvider("m", environ=environ).base_url == "http://127.0.0.1:9"
    assert AnthropicProvider("m", "http://127.0.0.1:8", environ=environ).base_url == "http://127.0.0.1:8"
    assert AnthropicProvider("m", environ={"ANTHROPIC_API_KEY": KEY}).base_url is None
    assert AnthropicProvider("m", api_key="sk-ant-explicit-0000", environ={}).base_url is None
