"""Candidates from `codex exec` editing a copy of the kernel in a throwaway workspace.

Codex 0.171 is a Node wrapper around a native binary that retries forever when its endpoint is
unreachable and that a plain timeout orphans. The workspace, the scrubbed environment, stdin from
/dev/null and the process-group lifetime (SIGTERM, then SIGKILL, at the deadline) are the shared agent
contract in orchestrator/providers/workspace.py; this module adds codex's command line, its credentials
and its `--output-last-message` file, read as the metadata fallback.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from orchestrator.providers.base import Proposal, ProposalContext, ProposalError, ProviderConfigError
from orchestrator.providers.workspace import (
    MAX_METADATA_BYTES,
    AgentOutcome,
    collect_proposal,
    discard_workspace,
    prepare_workspace,
    raise_for_timeout,
    read_workspace_file,
    run_agent,
    save_logs,
    scrubbed_environment,
    stderr_tail,
)

LAST_MESSAGE_FILE = "last_message.txt"

# Variables codex needs to authenticate and reach its endpoint, on top of the shared BASE_ENV.
_CODEX_ENV = frozenset(
    {"CODEX_HOME", "CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "RUST_LOG"}
)


def codex_environment(environ: Mapping[str, str], passthrough: tuple[str, ...] = ()) -> dict[str, str]:
    """The allow-listed part of the environment (locale `LC_*` included) plus explicitly named variables."""
    return scrubbed_environment(environ, _CODEX_ENV, passthrough)


def codex_command(binary: str, workspace: Path, model: str | None, prompt: str) -> list[str]:
    """The `codex exec` argv (0.171: `--full-auto` is gone, `--sandbox workspace-write` replaces it)."""
    argv = [
        binary, "exec", "--skip-git-repo-check", "--ephemeral", "--sandbox", "workspace-write",
        "--cd", str(workspace), "--output-last-message", str(workspace / LAST_MESSAGE_FILE),
    ]
    if model:
        argv += ["--model", model]
    return [*argv, prompt]


class CodexProvider:
    """One `codex exec` per candidate slot, each in its own temporary workspace."""

    name = "codex"
    concurrent = True

    def __init__(
        self,
        model: str | None = None,
        timeout_seconds: float = 600.0,
        codex_binary: str = "codex",
        *,
        max_prompt_chars: int = 48_000,
        keep_workspaces: bool = False,
        passthrough_env: tuple[str, ...] = (),
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        resolved = shutil.which(codex_binary, path=self._environ.get("PATH"))
        if resolved is None:
            raise ProviderConfigError(
                "codex executable not found on PATH; install @openai/codex or use --provider tune or --provider replay"
            )
        if timeout_seconds <= 0:
            raise ProviderConfigError(f"timeout_seconds must be > 0, got {timeout_seconds}")
        self.codex_binary = resolved
        self.model = model.strip() if model and model.strip() else None
        self.timeout_seconds = float(timeout_seconds)
        self.max_prompt_chars = max_prompt_chars
        self.keep_workspaces = keep_workspaces
        self.passthrough_env = passthrough_env

    def _deadline(self, context: ProposalContext) -> float:
        return max(min(self.timeout_seconds, context.deadline_seconds), 0.001)

    def collect(self, workspace: Path, context: ProposalContext, outcome: AgentOutcome) -> Proposal:
        """Turn a finished codex run into a validated proposal, or say why it is unusable."""
        raise_for_timeout(outcome, agent=self.name, deadline_seconds=self._deadline(context))
        if outcome.returncode != 0:
            raise ProposalError(f"codex exited with code {outcome.returncode}: {stderr_tail(outcome.stderr)}")

        def last_message() -> str | None:
            path = workspace / LAST_MESSAGE_FILE
            if not path.exists():
                return None
            text = read_workspace_file(path, MAX_METADATA_BYTES, "the last message", agent=self.name)
            return text.decode("utf-8", "replace")

        return collect_proposal(workspace, context, agent=self.name, final_message=last_message)

    async def propose(self, context: ProposalContext) -> Proposal:
        workspace, prompt = prepare_workspace(context, agent=self.name, max_prompt_chars=self.max_prompt_chars)
        try:
            outcome = await run_agent(
                codex_command(self.codex_binary, workspace, self.model, prompt),
                agent=self.name,
                cwd=workspace,
                env=codex_environment(self._environ, self.passthrough_env),
                deadline_seconds=self._deadline(context),
            )
            save_logs(workspace, outcome, agent=self.name)
            return self.collect(workspace, context, outcome)
        finally:
            if not self.keep_workspaces:
                discard_workspace(workspace)

    async def aclose(self) -> None:
        return None
