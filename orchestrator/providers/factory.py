"""Build the provider named on the command line; configuration problems raise ProviderConfigError."""

from __future__ import annotations

from orchestrator.ledger.config import RunConfig
from orchestrator.providers.base import CandidateProvider, ProviderConfigError

PROVIDERS = ("tune", "replay", "openai", "anthropic", "codex", "claude")


def create_provider(config: RunConfig) -> CandidateProvider:
    if config.provider == "replay":
        from orchestrator.providers.replay import ReplayProvider

        if config.replay_dir is None:
            raise ProviderConfigError("--provider replay needs --replay-dir DIR (candidates 001.py, 002.py, ...)")
        return ReplayProvider(config.replay_dir)
    if config.provider == "tune":
        from orchestrator.providers.tune import TuneProvider

        return TuneProvider()
    if config.provider == "openai":
        from orchestrator.providers.openai_provider import OpenAIProvider

        return OpenAIProvider(model=config.model, base_url=config.base_url, api_key=None,
                              timeout_seconds=config.budget.max_candidate_seconds)
    if config.provider == "anthropic":
        from orchestrator.providers.anthropic_provider import AnthropicProvider

        return AnthropicProvider(model=config.model, base_url=config.base_url, api_key=None,
                                 timeout_seconds=config.budget.max_candidate_seconds)
    if config.provider == "codex":
        from orchestrator.providers.codex import CodexProvider

        return CodexProvider(model=config.model, timeout_seconds=config.budget.max_candidate_seconds)
    if config.provider == "claude":
        from orchestrator.providers.claude_code import ClaudeCodeProvider

        return ClaudeCodeProvider(model=config.model, timeout_seconds=config.budget.max_candidate_seconds,
                                  base_url=config.base_url)
    raise ProviderConfigError(f"unknown provider {config.provider!r}; choose one of {', '.join(PROVIDERS)}")
