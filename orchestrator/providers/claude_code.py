"""Candidates from Claude Code's non-interactive mode, `claude -p`, editing a copy of the kernel.

The workspace, the scrubbed environment, stdin from /dev/null and the process-group lifetime are the
shared agent contract (orchestrator/providers/workspace.py), exactly as for codex.

What this relies on in Claude Code's command line (its CLI reference and headless-mode documentation):
- `-p`/`--print` runs one prompt non-interactively and exits; the prompt is the positional argument.
  stdin is /dev/null because a non-TTY stdin is read and appended to the prompt.
- `--output-format json` prints one result object on stdout: `type: "result"`, `subtype` (`success`,
  `error_max_turns`, `error_during_execution`), `is_error`, `result` (the final text), `num_turns`.
  A non-success subtype or `is_error` rejects the candidate; the `result` text is the metadata fallback.
- `--permission-mode acceptEdits` auto-approves file edits in the working directory (the workspace, its
  cwd; no `--add-dir`, so nothing else). `--allowedTools` names the tools that run without asking;
  `--disallowedTools` removes shell, web and sub-agent tools: in print mode a tool that would need a
  permission prompt is refused, never asked for.
- `--allowedTools`/`--disallowedTools` are variadic (`<tools...>`): they swallow every following
  positional argument, the prompt included. So `--` ends the options before the prompt.
- `--max-turns N` bounds the agent loop; `--no-session-persistence` (print mode) writes no session to
  disk; `--model` is passed only when given (Claude Code otherwise uses its own configured model).
Environment: the credentials Claude Code reads (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN,
CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_BASE_URL, ANTHROPIC_CUSTOM_HEADERS), its configuration directory
(HOME, CLAUDE_CONFIG_DIR: a `claude login` lives there) and model/timeout settings; never another
vendor's key, VCS or cloud credentials. CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 turns off auto-update
and telemetry for the run.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.providers.base import Proposal, ProposalContext, ProposalError, ProviderConfigError
from orchestrator.providers.redaction import redact_secrets
from orchestrator.providers.workspace import (
    AgentOutcome,
    collect_proposal,
    discard_workspace,
    prepare_workspace,
    raise_for_timeout,
    run_agent,
    save_logs,
    scrubbed_environment,
    stderr_tail,
)
from orchestrator.text import one_line

# Reading the workspace and editing/writing candidate.py and candidate_metadata.json is all it needs.
ALLOWED_TOOLS = ("Read", "Edit", "Write", "Glob", "Grep")
# No shell (it would run outside the workspace, unsandboxed), no network, no sub-agents or notebooks.
DISALLOWED_TOOLS = ("Bash", "WebFetch", "WebSearch", "Task", "NotebookEdit")
DEFAULT_MAX_TURNS = 40

_CLAUDE_ENV = frozenset(
    {
        "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL",
        "ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_MODEL", "CLAUDE_CONFIG_DIR", "API_TIMEOUT_MS",
    }
)


def claude_environment(
    environ: Mapping[str, str], passthrough: tuple[str, ...] = (), base_url: str | None = None
) -> dict[str, str]:
    """The allow-listed environment, with `base_url` (when given) as ANTHROPIC_BASE_URL."""
    env = scrubbed_environment(environ, _CLAUDE_ENV, passthrough)
    env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    return env


def claude_command(binary: str, model: str | None, max_turns: int, prompt: str) -> list[str]:
    """The `claude -p` argv; the prompt comes after `--`, out of reach of the variadic tool lists."""
    argv = [
        binary, "-p", "--output-format", "json", "--permission-mode", "acceptEdits", "--no-session-persistence",
        "--max-turns", str(max_turns),
    ]
    if model:
        argv += ["--model", model]
    argv += ["--allowedTools", ",".join(ALLOWED_TOOLS), "--disallowedTools", ",".join(DISALLOWED_TOOLS)]
    return [*argv, "--", prompt]


def parse_result(stdout: bytes) -> dict[str, Any] | None:
    """The `--output-format json` result object, or None when stdout holds none (a crash, a usage error)."""
    text = stdout.decode("utf-8", errors="replace").strip()
    # The result object is the last line; anything printed before it is not ours to parse.
    last_line = text.rsplit("\n", 1)[-1] if text else ""
    try:
        value = json.loads(last_line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) and value.get("type") == "result" else None


class ClaudeCodeProvider:
    """One `claude -p` per candidate slot, each in its own temporary workspace."""

    name = "claude"
    concurrent = True

    def __init__(
        self,
        model: str | None = None,
        timeout_seconds: float = 600.0,
        claude_binary: str = "claude",
        *,
        base_url: str | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        max_prompt_chars: int = 48_000,
        keep_workspaces: bool = False,
        passthrough_env: tuple[str, ...] = (),
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        resolved = shutil.which(claude_binary, path=self._environ.get("PATH"))
        if resolved is None:
            raise ProviderConfigError(
                "claude executable not found on PATH; install Claude Code (@anthropic-ai/claude-code) "
                "or use --provider anthropic, tune or replay"
            )
        if timeout_seconds <= 0:
            raise ProviderConfigError(f"timeout_seconds must be > 0, got {timeout_seconds}")
        if max_turns <= 0:
            raise ProviderConfigError(f"max_turns must be > 0, got {max_turns}")
        self.claude_binary = resolved
        self.model = model.strip() if model and model.strip() else None
        self.timeout_seconds = float(timeout_seconds)
        self.base_url = base_url or None
        self.max_turns = max_turns
        self.max_prompt_chars = max_prompt_chars
        self.keep_workspaces = keep_workspaces
        self.passthrough_env = passthrough_env

    def _deadline(self, context: ProposalContext) -> float:
        return max(min(self.timeout_seconds, context.deadline_seconds), 0.001)

    def collect(self, workspace: Path, context: ProposalContext, outcome: AgentOutcome) -> Proposal:
        """Turn a finished `claude -p` run into a validated proposal, or say why it is unusable."""
        raise_for_timeout(outcome, agent=self.name, deadline_seconds=self._deadline(context))
        result = parse_result(outcome.stdout)
        if result is not None and (result.get("is_error") or result.get("subtype") != "success"):
            said = redact_secrets(one_line(result.get("result") or "(no message)", 600))
            raise ProposalError(
                f"claude ended with {result.get('subtype')} after {result.get('num_turns')} turns: {said}"
            )
        if outcome.returncode != 0:
            raise ProposalError(f"claude exited with code {outcome.returncode}: {stderr_tail(outcome.stderr)}")
        if result is None:
            raise ProposalError("claude printed no --output-format json result object")
        final = result.get("result")
        return collect_proposal(
            workspace, context, agent=self.name, final_message=lambda: final if isinstance(final, str) else None
        )

    async def propose(self, context: ProposalContext) -> Proposal:
        workspace, prompt = prepare_workspace(context, agent=self.name, max_prompt_chars=self.max_prompt_chars)
        try:
            outcome = await run_agent(
                claude_command(self.claude_binary, self.model, self.max_turns, prompt),
                agent=self.name,
                cwd=workspace,
                env=claude_environment(self._environ, self.passthrough_env, self.base_url),
                deadline_seconds=self._deadline(context),
            )
            save_logs(workspace, outcome, agent=self.name)
            return self.collect(workspace, context, outcome)
        finally:
            if not self.keep_workspaces:
                discard_workspace(workspace)

    async def aclose(self) -> None:
        return None
