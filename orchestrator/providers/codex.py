"""Candidates from `codex exec` editing a copy of the kernel in a throwaway workspace.

Codex 0.171 is a Node wrapper around a native binary that retries forever when its endpoint is
unreachable and that a plain timeout orphans. So each proposal runs in its own session (process group)
under a trio deadline; on expiry the whole group gets SIGTERM, then SIGKILL, inside a shielded and bounded
cleanup (`end_process_group` in orchestrator/worker/process_tree.py, which also ends workers). Codex never
sees the user's checkout, VCS credentials or a terminal: it gets a temporary workspace, a scrubbed
environment and stdin from /dev/null.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import trio

from orchestrator.providers.base import Proposal, ProposalContext, ProposalError, ProviderConfigError
from orchestrator.providers.contract import (
    METADATA_KEYS,
    fenced_blocks,
    metadata_from_json_text,
    metadata_json_schema,
    validate_proposal,
)
from orchestrator.providers.prompt import build_prompt, evidence_terms
from orchestrator.providers.redaction import redact_secrets
from orchestrator.text import one_line, tail_lines
from orchestrator.worker.process_tree import end_process_group

CANDIDATE_FILE = "candidate.py"
ORIGINAL_FILE = "original.py"
EVIDENCE_FILE = "evidence.md"
METADATA_FILE = "candidate_metadata.json"
SCHEMA_FILE = "candidate_metadata.schema.json"
LAST_MESSAGE_FILE = "last_message.txt"
STDOUT_FILE = "codex.stdout.log"
STDERR_FILE = "codex.stderr.log"

MAX_LOG_BYTES = 256 * 1024  # per stream; older output is dropped, the tail is what explains a failure
MAX_CANDIDATE_BYTES = 4 * 1024 * 1024
MAX_METADATA_BYTES = 64 * 1024
MAX_INLINE_PROMPT_BYTES = 100_000  # Linux caps one argv string at 128 KiB
TERMINATE_GRACE_SECONDS = 2.0
DRAIN_GRACE_SECONDS = 0.5

# Variables codex needs to find itself, authenticate and reach its endpoint; everything else is dropped
# (GIT_*, SSH_AUTH_SOCK, GH_TOKEN, cloud credentials, ...).
_KEPT_ENV = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG", "LANGUAGE",
        "CODEX_HOME", "CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "XDG_CONFIG_HOME",
        "RUST_LOG",
    }
)

CODEX_INSTRUCTIONS = f"""\
You are improving one Triton/TLX kernel in this directory.
- Edit {CANDIDATE_FILE} in place: it must remain the complete kernel file. Do not create other source files.
- {ORIGINAL_FILE} is the unmodified incumbent, for comparison only. Never modify, move or delete it.
- Write {METADATA_FILE}: a JSON object matching {SCHEMA_FILE}, with the keys {", ".join(METADATA_KEYS)}
  (single lines, at most 240 characters; evidence quotes measured numbers, case ids or metrics).
- Do not run benchmarks and do not print source code or patches; finish with a one-line summary.
The measured evidence and rules follow (also in {EVIDENCE_FILE}).
"""


def codex_environment(environ: Mapping[str, str], passthrough: tuple[str, ...] = ()) -> dict[str, str]:
    """The allow-listed part of the environment (locale `LC_*` included) plus explicitly named variables."""
    kept = _KEPT_ENV | set(passthrough)
    return {name: value for name, value in environ.items() if name in kept or name.startswith("LC_")}


def codex_command(binary: str, workspace: Path, model: str | None, prompt: str) -> list[str]:
    """The `codex exec` argv (0.171: `--full-auto` is gone, `--sandbox workspace-write` replaces it)."""
    argv = [
        binary, "exec", "--skip-git-repo-check", "--ephemeral", "--sandbox", "workspace-write",
        "--cd", str(workspace), "--output-last-message", str(workspace / LAST_MESSAGE_FILE),
    ]
    if model:
        argv += ["--model", model]
    return [*argv, prompt]


@dataclass
class _TailBuffer:
    """Keeps the last `limit` bytes of a stream and counts what it dropped."""

    limit: int
    data: bytearray
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        excess = len(self.data) - self.limit
        if excess > 0:
            del self.data[:excess]
            self.dropped += excess


@dataclass(frozen=True)
class CodexOutcome:
    returncode: int | None
    timed_out: bool
    stdout: bytes
    stderr: bytes


async def _drain(stream: trio.abc.ReceiveStream, buffer: _TailBuffer, done: trio.Event) -> None:
    try:
        while chunk := await stream.receive_some(65536):
            buffer.add(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        done.set()


async def run_codex(
    argv: list[str], *, cwd: Path, env: dict[str, str], deadline_seconds: float
) -> CodexOutcome:
    """Run codex to completion or to the deadline; its process group never outlives this call."""
    stdout = _TailBuffer(MAX_LOG_BYTES, bytearray())
    stderr = _TailBuffer(MAX_LOG_BYTES, bytearray())
    try:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(cwd),
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise ProposalError(f"cannot start codex ({argv[0]}): {exc}") from None
    timed_out = False
    try:
        async with trio.open_nursery() as nursery:
            drained = (trio.Event(), trio.Event())
            nursery.start_soon(_drain, process.stdout, stdout, drained[0])
            nursery.start_soon(_drain, process.stderr, stderr, drained[1])
            with trio.move_on_after(deadline_seconds) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                timed_out = True
                with trio.CancelScope(shield=True):
                    await end_process_group(process, grace_seconds=TERMINATE_GRACE_SECONDS)
            # A grandchild may still hold the pipes: collect what is there, never wait for EOF.
            with trio.move_on_after(DRAIN_GRACE_SECONDS):
                await drained[0].wait()
                await drained[1].wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            # Also on a normal exit: helpers codex left behind in its group must not outlive the proposal.
            await end_process_group(process, grace_seconds=0.5)
            with trio.move_on_after(TERMINATE_GRACE_SECONDS):
                await process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    with suppress(trio.ClosedResourceError, OSError):
                        await stream.aclose()
    return CodexOutcome(process.returncode, timed_out, bytes(stdout.data), bytes(stderr.data))


def _read_workspace_file(path: Path, limit: int, what: str) -> bytes:
    """Read a file codex wrote, refusing symlinks, non-regular files and oversized files."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise ProposalError(f"codex did not leave {what} ({path.name}) in its workspace") from None
    if not path.is_file() or path.is_symlink():
        raise ProposalError(f"codex replaced {path.name} by something that is not a regular file")
    if info.st_size > limit:
        raise ProposalError(f"{path.name} has {info.st_size} bytes; the limit is {limit}")
    return path.read_bytes()


def _stderr_tail(stderr: bytes, lines: int = 8) -> str:
    """The last stderr lines, joined on one line and redacted: what a failed codex said last."""
    tail = tail_lines(stderr.decode("utf-8", errors="replace"), lines)
    return redact_secrets(one_line(" | ".join(tail), 1200)) if tail else "(no stderr output)"


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

    def prepare_workspace(self, context: ProposalContext) -> tuple[Path, str]:
        """Create the workspace files; returns the workspace and the prompt text for the command line."""
        evidence = build_prompt(context, max_chars=self.max_prompt_chars, include_source=False)
        if context.workspace_root is not None:
            context.workspace_root.mkdir(parents=True, exist_ok=True)
        workspace = Path(
            tempfile.mkdtemp(prefix=f"codex-{context.experiment_id}-", dir=context.workspace_root)
        ).resolve()
        (workspace / CANDIDATE_FILE).write_text(context.incumbent_source, encoding="utf-8")
        original = workspace / ORIGINAL_FILE
        original.write_text(context.incumbent_source, encoding="utf-8")
        original.chmod(0o444)
        (workspace / EVIDENCE_FILE).write_text(evidence, encoding="utf-8")
        (workspace / SCHEMA_FILE).write_text(json.dumps(metadata_json_schema(), indent=2), encoding="utf-8")
        prompt = f"{CODEX_INSTRUCTIONS}\n{evidence}"
        if len(prompt.encode("utf-8")) > MAX_INLINE_PROMPT_BYTES:
            prompt = f"{CODEX_INSTRUCTIONS}\nRead {EVIDENCE_FILE} first: it holds the measurements and rules."
        return workspace, prompt

    def collect(self, workspace: Path, context: ProposalContext, outcome: CodexOutcome) -> Proposal:
        """Turn a finished codex run into a validated proposal, or say why it is unusable."""
        if outcome.timed_out:
            raise ProposalError(
                f"codex did not finish within the {min(self.timeout_seconds, context.deadline_seconds):g} s "
                "candidate deadline; its process group was killed"
            )
        if outcome.returncode != 0:
            raise ProposalError(f"codex exited with code {outcome.returncode}: {_stderr_tail(outcome.stderr)}")
        original = workspace / ORIGINAL_FILE
        if original.is_symlink() or not original.is_file() or original.read_bytes() != context.incumbent_source.encode("utf-8"):
            raise ProposalError("codex modified the immutable original.py; the candidate is discarded")
        source_bytes = _read_workspace_file(workspace / CANDIDATE_FILE, MAX_CANDIDATE_BYTES, "the candidate")
        try:
            source = source_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise ProposalError("candidate.py is not valid UTF-8") from None
        metadata_path = workspace / METADATA_FILE
        if metadata_path.exists() or metadata_path.is_symlink():
            metadata_text = _read_workspace_file(metadata_path, MAX_METADATA_BYTES, "metadata").decode("utf-8", "replace")
        else:
            metadata_text = self._metadata_from_last_message(workspace)
        metadata = metadata_from_json_text(metadata_text)
        return validate_proposal(source, metadata, context.incumbent_source, evidence_terms=evidence_terms(context))

    @staticmethod
    def _metadata_from_last_message(workspace: Path) -> str:
        """Fallback when codex answered with a ```json block instead of writing the metadata file."""
        path = workspace / LAST_MESSAGE_FILE
        if not path.exists():
            raise ProposalError(f"codex wrote neither {METADATA_FILE} nor a last message")
        text = _read_workspace_file(path, MAX_METADATA_BYTES, "the last message").decode("utf-8", "replace")
        blocks = [body for language, body in fenced_blocks(text) if language == "json"]
        if len(blocks) != 1:
            raise ProposalError(f"codex wrote no {METADATA_FILE} and its last message has no single ```json block")
        return blocks[0]

    def _save_logs(self, workspace: Path, outcome: CodexOutcome) -> None:
        (workspace / STDOUT_FILE).write_bytes(outcome.stdout)
        (workspace / STDERR_FILE).write_bytes(outcome.stderr)

    async def propose(self, context: ProposalContext) -> Proposal:
        workspace, prompt = self.prepare_workspace(context)
        try:
            outcome = await run_codex(
                codex_command(self.codex_binary, workspace, self.model, prompt),
                cwd=workspace,
                env=codex_environment(self._environ, self.passthrough_env),
                deadline_seconds=max(min(self.timeout_seconds, context.deadline_seconds), 0.001),
            )
            self._save_logs(workspace, outcome)
            return self.collect(workspace, context, outcome)
        finally:
            if not self.keep_workspaces:
                shutil.rmtree(workspace, ignore_errors=True)

    async def aclose(self) -> None:
        return None
