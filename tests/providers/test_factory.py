"""`create_provider` turns the command line's choice into the provider, passing model, endpoint and deadline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from orchestrator.cli.main import UsageError, build_parser
from orchestrator.ledger.config import RunConfig
from orchestrator.providers.anthropic_provider import AnthropicProvider
from orchestrator.providers.base import ProviderConfigError
from orchestrator.providers.claude_code import ClaudeCodeProvider
from orchestrator.providers.factory import PROVIDERS, create_provider
from protocol.bundle import Budget

FAKE_BIN = Path(__file__).parent / "bin"


def config(tmp_path: Path, provider: str, **kwargs) -> RunConfig:
    paths = {name: tmp_path / name for name in ("kernel", "harness", "cases", "target", "output_dir")}
    return RunConfig(**paths, provider=provider, budget=Budget(max_candidate_seconds=45.0), **kwargs)


def test_the_cli_accepts_exactly_the_factory_providers(tmp_path):
    required = [f"--{name}={tmp_path / name}" for name in ("kernel", "harness", "cases", "target", "output-dir")]
    for name in PROVIDERS:
        assert build_parser().parse_args(["optimize", *required, "--provider", name]).provider == name
    with pytest.raises(UsageError, match="invalid choice"):
        build_parser().parse_args(["optimize", *required, "--provider", "gemini"])


def test_anthropic_gets_model_endpoint_and_deadline(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-factory-000000")
    provider = create_provider(config(tmp_path, "anthropic", model="claude-m", base_url="http://127.0.0.1:9"))
    assert isinstance(provider, AnthropicProvider)
    assert (provider.model, provider.base_url, provider.timeout_seconds) == ("claude-m", "http://127.0.0.1:9", 45.0)
    with pytest.raises(ProviderConfigError, match="needs --model"):
        create_provider(config(tmp_path, "anthropic"))


def test_claude_gets_model_endpoint_and_deadline(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", os.pathsep.join([str(FAKE_BIN), str(Path(sys.executable).parent)]))
    provider = create_provider(config(tmp_path, "claude", model="claude-m", base_url="http://127.0.0.1:9"))
    assert isinstance(provider, ClaudeCodeProvider)
    assert (provider.model, provider.base_url, provider.timeout_seconds) == ("claude-m", "http://127.0.0.1:9", 45.0)
    assert provider.claude_binary == str(FAKE_BIN / "claude")


def test_unknown_provider_names_the_choices(tmp_path):
    with pytest.raises(ProviderConfigError, match="choose one of tune, replay, openai, anthropic, codex, claude"):
        create_provider(config(tmp_path, "gemini"))
